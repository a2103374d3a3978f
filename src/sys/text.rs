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

/// The width in columns of the terminal on stderr, where stderr is one
/// (`TIOCGWINSZ`): for a status line that must never wrap.
pub fn stderr_columns() -> Option<u16> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize into the struct passed.
    let r = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut ws) };
    (r == 0 && ws.ws_col > 0).then_some(ws.ws_col)
}
