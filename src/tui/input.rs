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
//! stay as they are); end-of-file or an error means the terminal is gone.
//! Resizes need no event: ratatui checks the size at every draw, and the
//! SIGWINCH handler in `tui::mod` asks for one.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// What waiting on the terminal found.
#[derive(Debug, PartialEq)]
pub enum Input {
    /// Nothing before the timeout (or a signal interrupted the wait).
    Idle,
    /// Bytes were read; their keys were appended.
    Keys,
    /// The terminal was hung up or closed.
    Gone,
}

/// Waits up to `timeout_ms` for input on stdin and appends the keys read to
/// `keys`.
pub fn read_keys(timeout_ms: i32, keys: &mut Vec<KeyEvent>) -> Input {
    let mut fds = [libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    }];
    // SAFETY: `fds` is a valid array of one pollfd for the duration of the call.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), 1, timeout_ms) };
    if n <= 0 {
        return Input::Idle;
    }
    if fds[0].revents & libc::POLLIN == 0 {
        // POLLHUP / POLLERR / POLLNVAL without data.
        return Input::Gone;
    }
    let mut buf = [0u8; 1024];
    // SAFETY: reading at most `buf.len()` bytes into a valid, writable buffer.
    let r = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
    match r {
        0 => Input::Gone,
        r if r < 0 => match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR | libc::EAGAIN) => Input::Idle,
            _ => Input::Gone,
        },
        r => {
            parse(&buf[..r as usize], keys);
            Input::Keys
        }
    }
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

/// Terminal bytes (raw mode) to keys: printable UTF-8, Enter, Tab,
/// Backspace, Esc, Ctrl+letter, arrows, Home/End, Page Up/Down, Delete and
/// F1-F4 (CSI and SS3 forms). Other escape sequences are skipped whole. An
/// ESC at the end of the bytes is the Esc key.
pub fn parse(bytes: &[u8], keys: &mut Vec<KeyEvent>) {
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        i += 1;
        match b {
            0x1b => match bytes.get(i) {
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
                Some(b'O') if i + 1 < bytes.len() => {
                    // SS3: one final byte.
                    let code = match bytes[i + 1] {
                        b'A' => Some(KeyCode::Up),
                        b'B' => Some(KeyCode::Down),
                        b'C' => Some(KeyCode::Right),
                        b'D' => Some(KeyCode::Left),
                        b'H' => Some(KeyCode::Home),
                        b'F' => Some(KeyCode::End),
                        b'P' => Some(KeyCode::F(1)),
                        b'Q' => Some(KeyCode::F(2)),
                        b'R' => Some(KeyCode::F(3)),
                        b'S' => Some(KeyCode::F(4)),
                        _ => None,
                    };
                    keys.extend(code.map(key));
                    i += 2;
                }
                _ => keys.push(key(KeyCode::Esc)),
            },
            b'\r' | b'\n' => keys.push(key(KeyCode::Enter)),
            b'\t' => keys.push(key(KeyCode::Tab)),
            0x7f | 0x08 => keys.push(key(KeyCode::Backspace)),
            0x01..=0x1a => keys.push(KeyEvent::new(
                KeyCode::Char((b - 1 + b'a') as char),
                KeyModifiers::CONTROL,
            )),
            0x00 | 0x1c..=0x1f => {}
            _ => {
                // One UTF-8 character: its length from the leading byte.
                let len = match b {
                    0x00..=0x7f => 1,
                    0xc0..=0xdf => 2,
                    0xe0..=0xef => 3,
                    0xf0..=0xf7 => 4,
                    _ => 1,
                };
                let end = (i - 1 + len).min(bytes.len());
                if let Ok(s) = std::str::from_utf8(&bytes[i - 1..end]) {
                    keys.extend(s.chars().map(|c| key(KeyCode::Char(c))));
                }
                i = end;
            }
        }
    }
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
        assert_eq!(codes(b"\x1bq"), [KeyCode::Esc, KeyCode::Char('q')]);
        assert_eq!(
            codes(b"\x1b[1;5Cq\x1b[Iw"),
            [KeyCode::Right, KeyCode::Char('q'), KeyCode::Char('w')]
        );
        assert_eq!(codes(b"q\x1b[1;5"), [KeyCode::Char('q')]);
    }
}
