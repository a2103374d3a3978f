//! Text shaped to a width: wrapped at spaces, or cut with an ellipsis.
//! Nothing here draws, so what measures text without drawing it (the help's
//! line count that bounds its scrolling, `readpath presets`' listing) and
//! the drawing code under `render/` share one rule for where a line breaks.

/// `text` in lines of at most `first` characters (the first line) and
/// `rest` (the others), broken at spaces; a word longer than a line is
/// broken where it must be. Never cuts a word that fits on a line.
pub fn wrap_words(text: &str, first: usize, rest: usize) -> Vec<String> {
    let (first, rest) = (first.max(1), rest.max(1));
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    let mut width = first;
    let mut len = 0;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let mut word: Vec<char> = word.chars().collect();
        let sep = usize::from(len > 0);
        if len + sep + word.len() > width && len > 0 {
            lines.push(std::mem::take(&mut line));
            len = 0;
            width = rest;
        } else if sep == 1 {
            line.push(' ');
            len += 1;
        }
        // A word longer than a whole line: broken at the line's end.
        while word.len() > width - len {
            let take = width - len;
            line.extend(word.drain(..take));
            lines.push(std::mem::take(&mut line));
            len = 0;
            width = rest;
        }
        len += word.len();
        line.extend(word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// `text` cut to `width` characters with an ellipsis where it had to be
/// cut (at a space when one is near the end).
pub fn ellipsize(text: &str, width: usize) -> String {
    let n = text.chars().count();
    if n <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let keep: String = text.chars().take(width - 1).collect();
    // Back to the last space when that loses at most a third of the room.
    let cut = match keep.rfind(' ') {
        Some(i) if keep[..i].chars().count() >= (width - 1) * 2 / 3 => keep[..i].trim_end(),
        _ => keep.as_str(),
    };
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_wrap_at_spaces_and_long_words_break() {
        assert_eq!(
            wrap_words("workers.mode: bound -> unbound", 20, 18),
            ["workers.mode: bound", "-> unbound"]
        );
        assert_eq!(wrap_words("", 10, 10), [""]);
        assert_eq!(wrap_words("abcdefghij", 4, 3), ["abcd", "efg", "hij"]);
        assert_eq!(wrap_words("a bcdefgh", 4, 4), ["a", "bcde", "fgh"]);
        for l in wrap_words("the quick brown fox jumps over the lazy dog", 12, 10) {
            assert!(l.chars().count() <= 12, "{l}");
            assert!(!l.starts_with(' ') && !l.ends_with(' '), "{l:?}");
        }
    }

    #[test]
    fn a_cut_says_so_with_an_ellipsis() {
        assert_eq!(ellipsize("short", 10), "short");
        assert_eq!(ellipsize("queue_depth", 10), "queue_dep…");
        assert_eq!(
            ellipsize("q again quits; the baseline goes", 20),
            "q again quits; the…"
        );
        assert_eq!(ellipsize("abc", 0), "");
        assert_eq!(ellipsize("abcdef", 1), "…");
    }
}
