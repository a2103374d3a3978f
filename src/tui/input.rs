//! Keys read straight from the terminal (stdin), level-triggered.
//!
//! This exists because crossterm 0.29's event source cannot be trusted
//! with a live workload on a small machine. It waits edge-triggered (mio):
//! when a resize signal and key bytes arrive in the same wakeup it returns
//! the resize and leaves the bytes unread, and no new edge comes until the
//! next key, so `q` could sit unread indefinitely (seen in tmux: resume,
//! resize, then `q` ignored). On a hung-up terminal it reads end-of-file in
//! a loop forever, ignoring signals (an orphan spinning at 100% CPU after
//! `tmux kill-server`). Here the explorer polls stdin itself, reads what is
//! there, and turns it into crossterm `KeyEvent`s (the app's key functions
//! stay as they are) and `MouseEvent`s (the mouse reports clicks and the
//! wheel as SGR sequences, `ESC [ < b ; x ; y M`, or in the old X10 form,
//! `ESC [ M` and three bytes, which must never be read as keys: a click
//! would be a space, which pauses); end-of-file or an error means the
//! terminal is gone.
//! Resizes need no event: ratatui checks the size at every draw, and the
//! SIGWINCH handler in `tui::mod` asks for one.

use ratatui::crossterm::event::{
    Event, KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};

/// What waiting on the terminal found.
#[derive(Debug, PartialEq)]
pub enum Input {
    /// Nothing before the timeout (or a signal interrupted the wait).
    Idle,
    /// Bytes were read; their keys and mouse events were appended.
    Keys,
    /// The terminal was hung up or closed.
    Gone,
}

/// Waits up to `timeout_ms` for input on stdin and appends the keys and
/// mouse events read to `events`.
pub fn read_events(timeout_ms: i32, events: &mut Vec<Event>) -> Input {
    let mut buf = [0u8; 1024];
    match crate::sys::read_stdin(timeout_ms, &mut buf) {
        crate::sys::StdinRead::Idle => Input::Idle,
        crate::sys::StdinRead::Gone => Input::Gone,
        crate::sys::StdinRead::Bytes(n) => {
            parse_events(&buf[..n], events);
            Input::Keys
        }
    }
}

/// The keys of terminal bytes (mouse reports left out): see
/// [`parse_events`].
#[cfg(test)]
pub fn parse(bytes: &[u8], keys: &mut Vec<KeyEvent>) {
    let mut events = Vec::new();
    parse_events(bytes, &mut events);
    keys.extend(events.into_iter().filter_map(|e| match e {
        Event::Key(k) => Some(k),
        _ => None,
    }));
}

/// A mouse report's button byte and 1-based cell to an event: left, middle
/// and right presses (`release` for an SGR `m`), drags, the wheel; Shift,
/// Alt and Ctrl as modifiers. None for a position off the screen's origin.
fn mouse_event(b: u16, x: u16, y: u16, release: bool) -> Option<MouseEvent> {
    let button = match b & 3 {
        0 => MouseButton::Left,
        1 => MouseButton::Middle,
        _ => MouseButton::Right,
    };
    let kind = if b & 64 != 0 {
        match b & 3 {
            0 => MouseEventKind::ScrollUp,
            1 => MouseEventKind::ScrollDown,
            2 => MouseEventKind::ScrollLeft,
            _ => MouseEventKind::ScrollRight,
        }
    } else if b & 32 != 0 {
        if b & 3 == 3 {
            MouseEventKind::Moved
        } else {
            MouseEventKind::Drag(button)
        }
    } else if release || b & 3 == 3 {
        MouseEventKind::Up(button)
    } else {
        MouseEventKind::Down(button)
    };
    let mut modifiers = KeyModifiers::NONE;
    if b & 4 != 0 {
        modifiers |= KeyModifiers::SHIFT;
    }
    if b & 8 != 0 {
        modifiers |= KeyModifiers::ALT;
    }
    if b & 16 != 0 {
        modifiers |= KeyModifiers::CONTROL;
    }
    Some(MouseEvent {
        kind,
        column: x.checked_sub(1)?,
        row: y.checked_sub(1)?,
        modifiers,
    })
}

/// An SGR mouse report's parameters (`<b;x;y`, the final byte apart).
fn sgr_mouse(params: &[u8], release: bool) -> Option<MouseEvent> {
    let text = std::str::from_utf8(params.strip_prefix(b"<")?).ok()?;
    let mut it = text.split(';').map(|n| n.parse::<u16>().ok());
    let (b, x, y) = (it.next()??, it.next()??, it.next()??);
    if it.next().is_some() {
        return None;
    }
    mouse_event(b, x, y, release)
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

/// Terminal bytes (raw mode) to keys and mouse events: printable UTF-8,
/// Enter, Tab, Backspace, Esc, Ctrl+letter, Alt+key (ESC then the key:
/// reported with the ALT modifier, which steps a cycle backwards), arrows,
/// Home/End, Page Up/Down, Delete and F1-F4 (CSI and SS3 forms), mouse
/// reports (SGR and X10). Other escape sequences are skipped whole, and one
/// cut short (`ESC [ 1 ;`, `ESC O`, a mouse report) is dropped, never read
/// as Esc or keys. An ESC at the end of the bytes is the Esc key.
pub fn parse_events(bytes: &[u8], events: &mut Vec<Event>) {
    let mut keys = Vec::new();
    parse_into(bytes, &mut keys);
    events.extend(keys);
}

fn parse_into(bytes: &[u8], keys: &mut Vec<Event>) {
    let key = |code| Event::Key(key(code));
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        i += 1;
        if b != 0x1b {
            let (k, next) = plain_key(bytes, i - 1);
            keys.extend(k.map(Event::Key));
            i = next;
            continue;
        }
        match bytes.get(i) {
            Some(b'[') => {
                // CSI: parameters, then a final byte in 0x40..=0x7e.
                let start = i + 1;
                let mut end = start;
                while end < bytes.len() && !(0x40..=0x7e).contains(&bytes[end]) {
                    end += 1;
                }
                if end == bytes.len() {
                    return; // cut short: drop it
                }
                let params = &bytes[start..end];
                if params.first() == Some(&b'<') && matches!(bytes[end], b'M' | b'm') {
                    keys.extend(sgr_mouse(params, bytes[end] == b'm').map(Event::Mouse));
                    i = end + 1;
                    continue;
                }
                if params.is_empty() && bytes[end] == b'M' {
                    // X10: three bytes, each 32 more than its value.
                    let Some(&[b, x, y]) = bytes.get(end + 1..end + 4) else {
                        return; // cut short: drop it
                    };
                    let v = |c: u8| u16::from(c.saturating_sub(32));
                    keys.extend(mouse_event(v(b), v(x), v(y), false).map(Event::Mouse));
                    i = end + 4;
                    continue;
                }
                let code = match (bytes[end], params) {
                    (b'A', _) => Some(KeyCode::Up),
                    (b'B', _) => Some(KeyCode::Down),
                    (b'C', _) => Some(KeyCode::Right),
                    (b'D', _) => Some(KeyCode::Left),
                    (b'H', _) => Some(KeyCode::Home),
                    (b'F', _) => Some(KeyCode::End),
                    (b'~', b"1" | b"7") => Some(KeyCode::Home),
                    (b'~', b"4" | b"8") => Some(KeyCode::End),
                    (b'~', b"3") => Some(KeyCode::Delete),
                    (b'~', b"5") => Some(KeyCode::PageUp),
                    (b'~', b"6") => Some(KeyCode::PageDown),
                    _ => None,
                };
                keys.extend(code.map(key));
                i = end + 1;
            }
            Some(b'O') => {
                // SS3: one final byte; without it, cut short: dropped.
                let code = match bytes.get(i + 1) {
                    Some(b'A') => Some(KeyCode::Up),
                    Some(b'B') => Some(KeyCode::Down),
                    Some(b'C') => Some(KeyCode::Right),
                    Some(b'D') => Some(KeyCode::Left),
                    Some(b'H') => Some(KeyCode::Home),
                    Some(b'F') => Some(KeyCode::End),
                    Some(b'P') => Some(KeyCode::F(1)),
                    Some(b'Q') => Some(KeyCode::F(2)),
                    Some(b'R') => Some(KeyCode::F(3)),
                    Some(b'S') => Some(KeyCode::F(4)),
                    _ => None,
                };
                keys.extend(code.map(key));
                i = (i + 2).min(bytes.len());
            }
            Some(0x1b) | None => keys.push(key(KeyCode::Esc)),
            Some(_) => {
                // Alt+key: the next key, marked.
                let (k, next) = plain_key(bytes, i);
                keys.extend(k.map(|mut k| {
                    k.modifiers |= KeyModifiers::ALT;
                    Event::Key(k)
                }));
                i = next;
            }
        }
    }
}

/// The key of the (non-ESC) byte at `i` and the index after it.
fn plain_key(bytes: &[u8], i: usize) -> (Option<KeyEvent>, usize) {
    let b = bytes[i];
    let k = match b {
        b'\r' | b'\n' => key(KeyCode::Enter),
        b'\t' => key(KeyCode::Tab),
        0x7f | 0x08 => key(KeyCode::Backspace),
        0x01..=0x1a => KeyEvent::new(KeyCode::Char((b - 1 + b'a') as char), KeyModifiers::CONTROL),
        0x00 | 0x1b..=0x1f => return (None, i + 1),
        _ => {
            // One UTF-8 character: its length from the leading byte.
            let len = match b {
                0x00..=0x7f => 1,
                0xc0..=0xdf => 2,
                0xe0..=0xef => 3,
                0xf0..=0xf7 => 4,
                _ => 1,
            };
            let end = (i + len).min(bytes.len());
            return match std::str::from_utf8(&bytes[i..end])
                .ok()
                .and_then(|s| s.chars().next())
            {
                Some(c) => (Some(key(KeyCode::Char(c))), end),
                None => (None, end),
            };
        }
    };
    (Some(k), i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(bytes: &[u8]) -> Vec<KeyEvent> {
        let mut k = Vec::new();
        parse(bytes, &mut k);
        k
    }

    fn codes(bytes: &[u8]) -> Vec<KeyCode> {
        keys(bytes).into_iter().map(|k| k.code).collect()
    }

    #[test]
    fn printable_keys_and_controls() {
        assert_eq!(
            codes(b"q w+<"),
            [
                KeyCode::Char('q'),
                KeyCode::Char(' '),
                KeyCode::Char('w'),
                KeyCode::Char('+'),
                KeyCode::Char('<')
            ]
        );
        assert_eq!(
            codes(b"\r\n\t\x7f\x08"),
            [
                KeyCode::Enter,
                KeyCode::Enter,
                KeyCode::Tab,
                KeyCode::Backspace,
                KeyCode::Backspace
            ]
        );
        let ctrl_c = keys(b"\x03");
        assert_eq!(
            ctrl_c,
            [KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)]
        );
        assert_eq!(
            codes("é€".as_bytes()),
            [KeyCode::Char('é'), KeyCode::Char('€')]
        );
    }

    #[test]
    fn escape_sequences() {
        assert_eq!(
            codes(b"\x1b[A\x1b[B\x1b[C\x1b[D\x1b[H\x1b[1~\x1b[5~\x1bOA\x1bOP"),
            [
                KeyCode::Up,
                KeyCode::Down,
                KeyCode::Right,
                KeyCode::Left,
                KeyCode::Home,
                KeyCode::Home,
                KeyCode::PageUp,
                KeyCode::Up,
                KeyCode::F(1)
            ]
        );
        // Esc alone, Esc then a key, a modified arrow as the arrow, an
        // unknown sequence (focus event) skipped whole, one cut short dropped.
        assert_eq!(codes(b"\x1b"), [KeyCode::Esc]);
        assert_eq!(codes(b"\x1b\x1b"), [KeyCode::Esc, KeyCode::Esc]);
        assert_eq!(
            codes(b"\x1b[1;5Cq\x1b[Iw"),
            [KeyCode::Right, KeyCode::Char('q'), KeyCode::Char('w')]
        );
        assert_eq!(codes(b"q\x1b[1;5"), [KeyCode::Char('q')]);
    }

    #[test]
    fn alt_keys_and_cut_sequences_are_not_esc() {
        // Alt+q arrives as ESC q: it is q with ALT, never Esc (which quits).
        assert_eq!(
            keys(b"\x1bq"),
            [KeyEvent::new(KeyCode::Char('q'), KeyModifiers::ALT)]
        );
        assert_eq!(
            keys("\x1bé".as_bytes()),
            [KeyEvent::new(KeyCode::Char('é'), KeyModifiers::ALT)]
        );
        // A lone SS3 introducer is a sequence cut short: dropped.
        assert!(codes(b"\x1bO").is_empty());
        assert_eq!(codes(b"w\x1bO"), [KeyCode::Char('w')]);
        // Ctrl+Z is a key in raw mode (the explorer suspends on it).
        assert_eq!(
            keys(b"\x1a"),
            [KeyEvent::new(KeyCode::Char('z'), KeyModifiers::CONTROL)]
        );
    }

    fn events(bytes: &[u8]) -> Vec<Event> {
        let mut e = Vec::new();
        parse_events(bytes, &mut e);
        e
    }

    fn at(kind: MouseEventKind, column: u16, row: u16) -> Event {
        Event::Mouse(MouseEvent {
            kind,
            column,
            row,
            modifiers: KeyModifiers::NONE,
        })
    }

    #[test]
    fn mouse_reports_are_events_never_keys() {
        // SGR: press and release at (20, 10), 1-based: cell (19, 9).
        assert_eq!(
            events(b"\x1b[<0;20;10M\x1b[<0;20;10mq"),
            [
                at(MouseEventKind::Down(MouseButton::Left), 19, 9),
                at(MouseEventKind::Up(MouseButton::Left), 19, 9),
                Event::Key(key(KeyCode::Char('q'))),
            ]
        );
        assert_eq!(
            events(b"\x1b[<64;5;6M\x1b[<65;5;6M"),
            [
                at(MouseEventKind::ScrollUp, 4, 5),
                at(MouseEventKind::ScrollDown, 4, 5)
            ]
        );
        // X10: ESC [ M, then button, x, y each plus 32: a click is not a
        // space (which would pause).
        assert_eq!(
            events(b"\x1b[M !*"),
            [at(MouseEventKind::Down(MouseButton::Left), 0, 9)]
        );
        // Cut short or malformed: dropped whole, no keys.
        assert!(events(b"\x1b[<0;20").is_empty());
        assert!(events(b"\x1b[M !").is_empty());
        assert!(events(b"\x1b[<0;0;0M").is_empty());
        assert!(events(b"\x1b[<0;1M").is_empty());
        // parse() keeps the keys only.
        assert_eq!(codes(b"\x1b[<0;1;1Mw"), [KeyCode::Char('w')]);
    }
}
