//! Text made safe for a terminal. Lives at the bottom of the crate because
//! `sys::trust` names user paths in its messages, and everything above
//! (`output::format` re-exports it) sanitises the same way.

/// `s` with every control character (escape sequences included) replaced
/// by U+FFFD, so text from a file (a demo caption, a preset description) can
/// never drive the terminal it is printed on. Newlines and tabs are kept
/// when `keep_lines`.
pub fn printable(s: &str, keep_lines: bool) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() && !(keep_lines && (c == '\n' || c == '\t')) {
                '\u{fffd}'
            } else {
                c
            }
        })
        .collect()
}
