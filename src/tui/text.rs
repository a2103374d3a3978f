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

/// `line` in at most `width` characters without cutting a field: fields
/// are separated by ` · ` or by two or more spaces, and whole fields are
/// kept from the left (the most important first) while they fit; the rest
/// are dropped. A first field longer than `width` is shortened with an
/// ellipsis (the caller gives a shorter form where that can happen).
pub fn fit_fields(line: &str, width: usize) -> String {
    if line.chars().count() <= width {
        return line.to_string();
    }
    // (separator before, field), in order.
    let mut parts: Vec<(&str, &str)> = Vec::new();
    let mut rest = line;
    let mut before = "";
    loop {
        let next = [" · ", "  "]
            .iter()
            .filter_map(|sep| rest.find(sep).map(|i| (i, *sep)))
            .min_by_key(|(i, _)| *i);
        match next {
            Some((i, sep)) => {
                parts.push((before, &rest[..i]));
                let after = &rest[i..];
                let field_at = after.len() - after[sep.len()..].trim_start_matches(' ').len();
                before = &after[..field_at];
                rest = &after[field_at..];
            }
            None => {
                parts.push((before, rest));
                break;
            }
        }
    }
    let mut out = String::new();
    for (sep, field) in parts {
        let sep = if out.is_empty() { "" } else { sep };
        if out.chars().count() + sep.chars().count() + field.chars().count() > width {
            break;
        }
        out.push_str(sep);
        out.push_str(field);
    }
    if out.is_empty() {
        return ellipsize(line, width);
    }
    out
}

/// The first of `candidates` (longest first: a title's forms, a note's)
/// that fits `width` characters whole; the last where none does, empty
/// without candidates.
pub fn first_fitting<S: AsRef<str>>(candidates: &[S], width: usize) -> &str {
    candidates
        .iter()
        .map(AsRef::as_ref)
        .find(|c| c.chars().count() <= width)
        .or_else(|| candidates.last().map(AsRef::as_ref))
        .unwrap_or("")
}

/// A message or caption in at most `width` characters, never cut inside a
/// word or a field, for a one-line place whose text is also whole
/// elsewhere (the events panel, `where_whole`). A list of changes
/// (`a: x -> y, b: u -> v`) keeps its whole leading items and says how
/// many more there are (`a: x -> y +1 more in events`); prose keeps its
/// whole leading words and says where the rest is (`the first words … in
/// events`). Empty where not even that fits.
pub fn fit_message(text: &str, width: usize, where_whole: &str) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let len = |s: &str| s.chars().count();
    // A list of changes: items separated by ", " (or "; "), each a
    // `key: from -> to`.
    let items: Vec<&str> = text.split([',', ';']).map(str::trim).collect();
    if items.len() > 1 && items.iter().all(|i| i.contains(" -> ")) {
        for keep in (1..items.len()).rev() {
            let head = items[..keep].join(", ");
            let more = format!("{head} +{} more {where_whole}", items.len() - keep);
            if len(&more) <= width {
                return more;
            }
        }
    }
    let tail = format!(" … {where_whole}");
    let mut out = String::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let sep = usize::from(!out.is_empty());
        if len(&out) + sep + len(word) + len(&tail) > width {
            break;
        }
        if sep == 1 {
            out.push(' ');
        }
        out.push_str(word);
    }
    if out.is_empty() {
        return if len(&tail) - 1 <= width {
            tail.trim_start().to_string()
        } else {
            String::new()
        };
    }
    out + &tail
}

/// Short names of settings whose names outgrow the settings panel's name
/// column (10 or 14 characters): a name is shortened from this table, never
/// cut, and `?` on the key's row shows the whole name.
pub const SHORT_NAMES: &[(&str, &str)] = &[
    ("affinity_scope", "scope"),
    ("affinity_strict", "strict"),
    ("corrupt_every", "corrupt"),
    ("limit_cache", "limit_cch"),
    ("queue_depth", "qdepth"),
    ("read_ahead_kb", "ra_kb"),
    ("reader_cpus", "rd_cpus"),
    ("rq_affinity", "rq_aff"),
    ("submit_batch", "batch"),
    ("unbound_cpus", "ub_cpus"),
    ("verify_mode", "vfy_mode"),
];

/// `name` in at most `width` characters: whole, or its short form from
/// [`SHORT_NAMES`], or (a name the table lacks) cut with an ellipsis.
pub fn fit_name(name: &str, width: usize) -> String {
    if name.chars().count() <= width {
        return name.to_string();
    }
    match SHORT_NAMES.iter().find(|(n, _)| *n == name) {
        Some((_, short)) if short.chars().count() <= width => short.to_string(),
        _ => ellipsize(name, width),
    }
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

#[cfg(test)]
mod fit_tests {
    use super::*;

    #[test]
    fn fields_are_dropped_whole_from_the_right() {
        let l = "per bio · hit 21% · 9.1K bio/s";
        assert_eq!(fit_fields(l, 40), l);
        assert_eq!(fit_fields(l, 29), "per bio · hit 21%");
        assert_eq!(fit_fields(l, 17), "per bio · hit 21%");
        assert_eq!(fit_fields(l, 16), "per bio");
        assert_eq!(
            fit_fields("fscrypt  172/s  q99 1.1ms", 22),
            "fscrypt  172/s"
        );
        assert_eq!(fit_fields("a  b", 1), "a");
        assert_eq!(fit_fields("abcdef  g", 4), "abc…");
    }

    #[test]
    fn messages_keep_whole_items_and_words_and_say_where_the_rest_is() {
        let m =
            "workload.engine: uring -> sync, workload.sleep: plain -> iowait (applied in 96 ms)";
        assert_eq!(fit_message(m, 100, "in events"), m);
        assert_eq!(
            fit_message(m, 60, "in events"),
            "workload.engine: uring -> sync +1 more in events"
        );
        assert_eq!(
            fit_message("q again quits; the baseline goes with it", 30, "(events)"),
            "q again quits; the … (events)"
        );
        assert_eq!(
            fit_message("the fsverity seed on a bound queue", 24, "(events)"),
            "the fsverity … (events)"
        );
        assert_eq!(fit_message("abcdefghijkl mn", 11, "(e)"), "… (e)");
        assert_eq!(fit_message("abcdefghijkl mn", 3, "(e)"), "");
    }

    #[test]
    fn the_first_form_that_fits_else_the_last() {
        let forms = ["run_delay after mode: bound", "run_delay change", "change"];
        assert_eq!(first_fitting(&forms, 40), forms[0]);
        assert_eq!(first_fitting(&forms, 16), "run_delay change");
        assert_eq!(first_fitting(&forms, 3), "change");
        assert_eq!(first_fitting::<&str>(&[], 3), "");
    }

    #[test]
    fn names_shorten_from_the_table_never_cut() {
        assert_eq!(fit_name("queue_depth", 10), "qdepth");
        assert_eq!(fit_name("queue_depth", 14), "queue_depth");
        assert_eq!(fit_name("mode", 10), "mode");
        assert!(SHORT_NAMES.iter().all(|(_, s)| s.chars().count() <= 10));
    }
}
