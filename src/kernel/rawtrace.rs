//! The kernel's trace events read as the ring buffer holds them
//! (`per_cpu/cpuN/trace_pipe_raw`), not as `trace_pipe` prints them.
//!
//! `trace_pipe` formats every event as text in the reading thread, in the
//! kernel: `%ps` looks the work function up in kallsyms, `%s` copies the
//! queue's name, and readpath then parses the line back. In a lab guest
//! under QEMU's TCG that observer cost 35% of the kernel target's
//! throughput at random 4K QD8 (`compare --vary kernel.trace=false,true`,
//! 5 rounds: 13.1 against 8.4 MiB/s): the kernel was measured slower than
//! it runs, and the model held against it looked 1.4x faster. The raw
//! pipe hands over whole ring-buffer pages, which this module decodes
//! with the layouts the kernel publishes (`events/header_page`, each
//! event's `format`): a page header (its base timestamp, the committed
//! length with the missed-events flags), then events, each a 32-bit
//! header (`type_len` 5 bits, `time_delta` 27 bits) and, for data events,
//! the record whose `common_type` names the event. Time extends and
//! absolute stamps move the clock, padding (discarded events) does not.
//! The events come out as [`Event`]s, the same the `trace_pipe` parser
//! gives, so one aggregator serves both.

use std::collections::HashMap;
use std::path::Path;

use super::event::Event;

/// `RB_MISSED_EVENTS`: events were lost before this page.
const MISSED_EVENTS: u64 = 1 << 31;
/// `RB_MISSED_STORED`: their count is stored after the page's data.
const MISSED_STORED: u64 = 1 << 30;
/// `type_len` values that are not data.
const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;

/// Where one field of an event record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Offset in the record, bytes.
    pub offset: usize,
    /// Size, bytes.
    pub size: usize,
    /// A `__data_loc` field: a u32 whose low half is the offset of the
    /// data in the record and whose high half its length.
    pub data_loc: bool,
}

/// One event's `format` file: its id and its fields by name.
#[derive(Debug, Clone, Default)]
pub struct Format {
    /// `ID:` (the record's `common_type`).
    pub id: u16,
    fields: HashMap<String, Field>,
}

impl Format {
    /// Parses a `format` file (`ID: 337`, `field:void * work;
    /// offset:8; size:8; signed:0;`, ...); None without an id.
    pub fn parse(text: &str) -> Option<Format> {
        let mut f = Format::default();
        let mut id = None;
        for line in text.lines() {
            let line = line.trim();
            if let Some(v) = line.strip_prefix("ID:") {
                id = v.trim().parse().ok();
            } else if let Some((name, field)) = parse_field(line) {
                f.fields.insert(name, field);
            }
        }
        f.id = id?;
        Some(f)
    }

    /// The field `name`.
    pub fn field(&self, name: &str) -> Option<Field> {
        self.fields.get(name).copied()
    }
}

/// `field:TYPE NAME[N];\toffset:O;\tsize:S;\tsigned:X;` as (NAME, field).
fn parse_field(line: &str) -> Option<(String, Field)> {
    let rest = line.strip_prefix("field:")?;
    let mut parts = rest.split(';').map(str::trim);
    let decl = parts.next()?;
    let mut offset = None;
    let mut size = None;
    for p in parts {
        if let Some(v) = p.strip_prefix("offset:") {
            offset = v.trim().parse().ok();
        } else if let Some(v) = p.strip_prefix("size:") {
            size = v.trim().parse().ok();
        }
    }
    let name = decl.split_whitespace().next_back()?;
    let name = name.split('[').next()?.trim_start_matches('*');
    Some((
        name.to_string(),
        Field {
            offset: offset?,
            size: size?,
            data_loc: decl.contains("__data_loc"),
        },
    ))
}

/// The page layout (`events/header_page`): where the commit word and the
/// data are (a 64-bit kernel: 8 and 16; a 32-bit one: 8 and 12).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLayout {
    commit: Field,
    data: usize,
}

impl PageLayout {
    /// Parses `events/header_page`.
    pub fn parse(text: &str) -> Option<PageLayout> {
        let mut commit = None;
        let mut data = None;
        for line in text.lines() {
            // `field: u64 timestamp;` has a space after the colon here.
            let line = line.trim().replacen("field: ", "field:", 1);
            if let Some((name, f)) = parse_field(&line) {
                match name.as_str() {
                    "commit" => commit = Some(f),
                    "data" => data = Some(f.offset),
                    _ => {}
                }
            }
        }
        Some(PageLayout {
            commit: commit?,
            data: data?,
        })
    }
}

/// Each event readpath decodes: its id and the fields it reads.
#[derive(Debug, Clone)]
pub struct Layouts {
    page: PageLayout,
    queue: Option<(u16, Field, Field, Field)>,
    start: Option<(u16, Field)>,
    end: Option<(u16, Field)>,
    issue: Option<(u16, Field, Field, Field)>,
    complete: Option<(u16, Field, Field, Field)>,
    pid: Field,
}

impl Layouts {
    /// The layouts of the tracefs instance (or top level) `dir`'s
    /// `events/`; None where the page header or the workqueue events'
    /// formats are missing or lack a field readpath reads.
    pub fn read(dir: &Path) -> Option<Layouts> {
        let read = |p: &str| read_whole(&dir.join("events").join(p));
        let fmt = |p: &str| read(&format!("{p}/format")).and_then(|t| Format::parse(&t));
        Layouts::of(
            &read("header_page")?,
            fmt("workqueue/workqueue_queue_work"),
            fmt("workqueue/workqueue_execute_start"),
            fmt("workqueue/workqueue_execute_end"),
            fmt("block/block_rq_issue"),
            fmt("block/block_rq_complete"),
        )
    }

    /// From the texts of `header_page` and the events' formats.
    pub fn of(
        header_page: &str,
        queue: Option<Format>,
        start: Option<Format>,
        end: Option<Format>,
        issue: Option<Format>,
        complete: Option<Format>,
    ) -> Option<Layouts> {
        let (queue, start, end) = (queue?, start?, end?);
        let rq = |f: Option<Format>| {
            let f = f?;
            Some((f.id, f.field("dev")?, f.field("sector")?, f.field("rwbs")?))
        };
        Some(Layouts {
            page: PageLayout::parse(header_page)?,
            pid: start.field("common_pid")?,
            queue: Some((
                queue.id,
                queue.field("work")?,
                queue.field("workqueue")?,
                queue.field("cpu")?,
            )),
            start: Some((start.id, start.field("work")?)),
            end: Some((end.id, end.field("work")?)),
            issue: rq(issue),
            complete: rq(complete),
        })
    }
}

/// A tracefs text file read in large reads: `events/header_page` answers
/// a small first read (`read_to_string` starts with 32 bytes) with those
/// bytes and then ends, where one large read gets it whole.
fn read_whole(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut have = 0;
    loop {
        match f.read(&mut buf[have..]) {
            Ok(0) => break,
            Ok(n) => {
                have += n;
                if have == buf.len() {
                    return None;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    buf.truncate(have);
    String::from_utf8(buf).ok()
}

fn uint(b: &[u8], at: usize, size: usize) -> Option<u64> {
    let s = b.get(at..at + size)?;
    Some(match size {
        1 => u64::from(s[0]),
        2 => u64::from(u16::from_le_bytes(s.try_into().ok()?)),
        4 => u64::from(u32::from_le_bytes(s.try_into().ok()?)),
        8 => u64::from_le_bytes(s.try_into().ok()?),
        _ => return None,
    })
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// A field's value as an unsigned integer.
fn get(rec: &[u8], f: Field) -> Option<u64> {
    uint(rec, f.offset, f.size)
}

/// A `__data_loc char[]` or `char[N]` field as text (up to its NUL).
fn text(rec: &[u8], f: Field) -> Option<&str> {
    let bytes = if f.data_loc {
        let loc = u32_at(rec, f.offset)?;
        let (at, len) = ((loc & 0xffff) as usize, (loc >> 16) as usize);
        rec.get(at..at + len)?
    } else {
        rec.get(f.offset..f.offset + f.size)?
    };
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    std::str::from_utf8(&bytes[..end]).ok()
}

impl Layouts {
    /// The record `rec` of a data event at `t_ns` on `cpu`, as an
    /// [`Event`]; None for an event readpath does not read.
    fn event<'a>(&self, rec: &'a [u8], cpu: u32, t_ns: u64) -> Option<Event<'a>> {
        let id = uint(rec, 0, 2)? as u16;
        if let Some((qid, work, wq, pool_cpu)) = self.queue
            && id == qid
        {
            let c = get(rec, pool_cpu)?;
            return Some(Event::Queue {
                cpu,
                t_ns,
                work: get(rec, work)?,
                queue: text(rec, wq)?,
                // The pool's CPU: -1 (WORK_CPU_UNBOUND's pool) for an
                // unbound one: every bit of the field set, however wide.
                unbound: c == u64::MAX >> (64 - 8 * pool_cpu.size.clamp(1, 8)),
            });
        }
        if let Some((sid, work)) = self.start
            && id == sid
        {
            return Some(Event::Start {
                cpu,
                t_ns,
                work: get(rec, work)?,
                pid: get(rec, self.pid)? as u32 as i32,
            });
        }
        if let Some((eid, work)) = self.end
            && id == eid
        {
            return Some(Event::End {
                t_ns,
                work: get(rec, work)?,
            });
        }
        for (which, issue) in [(self.issue, true), (self.complete, false)] {
            if let Some((rid, dev, sector, rwbs)) = which
                && id == rid
            {
                let d = get(rec, dev)? as u32;
                let dev = (d >> 20, d & ((1 << 20) - 1));
                let sector = get(rec, sector)?;
                let read = text(rec, rwbs)?.contains('R');
                return Some(Event::rq(issue, t_ns, dev, sector, read));
            }
        }
        None
    }

    /// Decodes one page read from `cpu`'s `trace_pipe_raw` into `out`:
    /// the events readpath reads, in the page's (time) order, after an
    /// [`Event::Lost`] where the page says events were lost before it.
    /// Returns false for a page it cannot make sense of (it stops there).
    pub fn decode_page<'a>(&self, page: &'a [u8], cpu: u32, out: &mut Vec<Event<'a>>) -> bool {
        let Some(mut t) = uint(page, 0, 8) else {
            return false;
        };
        let Some(commit) = get(page, self.page.commit) else {
            return false;
        };
        let len = (commit & !(MISSED_EVENTS | MISSED_STORED)) as usize;
        let data = self.page.data;
        let Some(end) = data.checked_add(len).filter(|&e| e <= page.len()) else {
            return false;
        };
        if commit & MISSED_EVENTS != 0 {
            let events = if commit & MISSED_STORED != 0 {
                uint(page, end, self.page.commit.size).unwrap_or(1)
            } else {
                1
            };
            out.push(Event::Lost { cpu, events });
        }
        // Records end where the committed data does, not at the page's end.
        let page = &page[..end];
        let mut at = data;
        while at + 4 <= end {
            let Some(h) = u32_at(page, at) else {
                return false;
            };
            let (type_len, delta) = (h & 0x1f, u64::from(h >> 5));
            match type_len {
                TYPE_PADDING => {
                    // A null event: the rest of the page is empty. Else a
                    // discarded event: its length follows, no time.
                    let Some(n) = u32_at(page, at + 4) else {
                        return true;
                    };
                    if delta == 0 && n == 0 {
                        return true;
                    }
                    at += 4 + n as usize;
                }
                TYPE_TIME_EXTEND => {
                    let Some(hi) = u32_at(page, at + 4) else {
                        return false;
                    };
                    t = t.wrapping_add((u64::from(hi) << 27) | delta);
                    at += 8;
                }
                TYPE_TIME_STAMP => {
                    let Some(hi) = u32_at(page, at + 4) else {
                        return false;
                    };
                    // 59 bits of an absolute stamp; the rest from the page's.
                    let abs = (u64::from(hi) << 27) | delta;
                    let msb = t & !((1u64 << 59) - 1);
                    t = if msb != 0 && (abs | msb) < t {
                        (abs | msb).wrapping_add(1 << 59)
                    } else {
                        abs | msb
                    };
                    at += 8;
                }
                0 => {
                    let Some(n) = u32_at(page, at + 4) else {
                        return false;
                    };
                    if n < 4 {
                        return false;
                    }
                    t = t.wrapping_add(delta);
                    let rec = page.get(at + 8..at + 4 + n as usize);
                    let Some(rec) = rec else {
                        return false;
                    };
                    out.extend(self.event(rec, cpu, t));
                    at += 4 + n as usize;
                }
                n => {
                    t = t.wrapping_add(delta);
                    let Some(rec) = page.get(at + 4..at + 4 + 4 * n as usize) else {
                        return false;
                    };
                    out.extend(self.event(rec, cpu, t));
                    at += 4 + 4 * n as usize;
                }
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The formats of a 64-bit Linux 6.18 (this machine's tracefs).
    const HEADER_PAGE: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";
    const COMMON: &str = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n";

    fn fmt(name: &str, id: u16, fields: &str) -> Format {
        Format::parse(&format!(
            "name: {name}\nID: {id}\nformat:\n{COMMON}{fields}"
        ))
        .unwrap()
    }

    fn layouts() -> Layouts {
        Layouts::of(
            HEADER_PAGE,
            Some(fmt(
                "workqueue_queue_work",
                337,
                "\tfield:void * work;\toffset:8;\tsize:8;\tsigned:0;
\tfield:void * function;\toffset:16;\tsize:8;\tsigned:0;
\tfield:__data_loc char[] workqueue;\toffset:24;\tsize:4;\tsigned:0;
\tfield:int req_cpu;\toffset:28;\tsize:4;\tsigned:1;
\tfield:int cpu;\toffset:32;\tsize:4;\tsigned:1;\n",
            )),
            Some(fmt(
                "workqueue_execute_start",
                335,
                "\tfield:void * work;\toffset:8;\tsize:8;\tsigned:0;
\tfield:void * function;\toffset:16;\tsize:8;\tsigned:0;\n",
            )),
            Some(fmt(
                "workqueue_execute_end",
                334,
                "\tfield:void * work;\toffset:8;\tsize:8;\tsigned:0;
\tfield:void * function;\toffset:16;\tsize:8;\tsigned:0;\n",
            )),
            Some(fmt(
                "block_rq_issue",
                2104,
                "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;
\tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;
\tfield:unsigned int nr_sector;\toffset:24;\tsize:4;\tsigned:0;
\tfield:unsigned int bytes;\toffset:28;\tsize:4;\tsigned:0;
\tfield:unsigned short ioprio;\toffset:32;\tsize:2;\tsigned:0;
\tfield:char rwbs[10];\toffset:34;\tsize:10;\tsigned:0;
\tfield:char comm[16];\toffset:44;\tsize:16;\tsigned:0;
\tfield:__data_loc char[] cmd;\toffset:60;\tsize:4;\tsigned:0;\n",
            )),
            None,
        )
        .unwrap()
    }

    /// A record of `id` with `pid`, `len` bytes.
    fn record(id: u16, pid: i32, len: usize) -> Vec<u8> {
        let mut r = vec![0u8; len];
        r[..2].copy_from_slice(&id.to_le_bytes());
        r[4..8].copy_from_slice(&pid.to_le_bytes());
        r
    }

    fn queue_rec(work: u64, name: &str, pool_cpu: i32) -> Vec<u8> {
        let mut r = record(337, 10, 36);
        r[8..16].copy_from_slice(&work.to_le_bytes());
        let loc = (36u32) | ((name.len() as u32 + 1) << 16);
        r[24..28].copy_from_slice(&loc.to_le_bytes());
        r[28..32].copy_from_slice(&(-1i32).to_le_bytes());
        r[32..36].copy_from_slice(&pool_cpu.to_le_bytes());
        r.extend_from_slice(name.as_bytes());
        r.push(0);
        while !r.len().is_multiple_of(4) {
            r.push(0);
        }
        r
    }

    fn exec_rec(id: u16, work: u64, pid: i32) -> Vec<u8> {
        let mut r = record(id, pid, 24);
        r[8..16].copy_from_slice(&work.to_le_bytes());
        r
    }

    /// A page: base time, events as (delta, record) or raw headers.
    enum E {
        Data(u32, Vec<u8>),
        /// A data event written with type_len 0 (its length in array[0]).
        Long(u32, Vec<u8>),
        Extend(u64),
        Discarded(u32),
    }

    fn page(ts: u64, events: &[E], missed: Option<u64>) -> Vec<u8> {
        let mut d = Vec::new();
        for e in events {
            match e {
                E::Data(delta, rec) => {
                    assert!(rec.len().is_multiple_of(4) && rec.len() / 4 <= 28);
                    d.extend_from_slice(&((delta << 5) | (rec.len() as u32 / 4)).to_le_bytes());
                    d.extend_from_slice(rec);
                }
                E::Long(delta, rec) => {
                    d.extend_from_slice(&(delta << 5).to_le_bytes());
                    d.extend_from_slice(&(rec.len() as u32 + 4).to_le_bytes());
                    d.extend_from_slice(rec);
                }
                E::Extend(delta) => {
                    let lo = (*delta & ((1 << 27) - 1)) as u32;
                    d.extend_from_slice(&((lo << 5) | TYPE_TIME_EXTEND).to_le_bytes());
                    d.extend_from_slice(&((delta >> 27) as u32).to_le_bytes());
                }
                E::Discarded(len) => {
                    d.extend_from_slice(&((1 << 5) | TYPE_PADDING).to_le_bytes());
                    d.extend_from_slice(&len.to_le_bytes());
                    d.extend(std::iter::repeat_n(0xee, *len as usize - 4));
                }
            }
        }
        let mut commit = d.len() as u64;
        let mut p = vec![0u8; 4096];
        p[..8].copy_from_slice(&ts.to_le_bytes());
        p[16..16 + d.len()].copy_from_slice(&d);
        if let Some(n) = missed {
            p[16 + d.len()..24 + d.len()].copy_from_slice(&n.to_le_bytes());
            commit |= MISSED_EVENTS | MISSED_STORED;
        }
        p[8..16].copy_from_slice(&commit.to_le_bytes());
        p
    }

    #[test]
    fn a_page_decodes_to_the_events_trace_pipe_would_print() {
        let l = layouts();
        let mut issue = record(2104, 99, 64);
        issue[8..12].copy_from_slice(&((254u32 << 20) | 3).to_le_bytes());
        issue[16..24].copy_from_slice(&2048u64.to_le_bytes());
        issue[34..36].copy_from_slice(b"RA");
        let p = page(
            1_000_000,
            &[
                E::Data(
                    10,
                    queue_rec(0xffff_8880_1234_5678, "fscrypt_read_queue", -1),
                ),
                E::Discarded(24),
                E::Long(5, exec_rec(335, 0xffff_8880_1234_5678, 4242)),
                E::Extend(1 << 30),
                E::Data(7, exec_rec(334, 0xffff_8880_1234_5678, 4242)),
                E::Data(
                    1,
                    queue_rec(0xffff_8880_0000_0001, "fsverity_read_queue", 1),
                ),
                E::Data(2, issue),
                // An event readpath does not read.
                E::Data(3, record(9999, 1, 8)),
            ],
            None,
        );
        let mut out = Vec::new();
        assert!(l.decode_page(&p, 3, &mut out));
        let t0 = 1_000_000 + 10;
        assert_eq!(
            out,
            vec![
                Event::Queue {
                    cpu: 3,
                    t_ns: t0,
                    work: 0xffff_8880_1234_5678,
                    queue: "fscrypt_read_queue",
                    unbound: true,
                },
                // The discarded event moved no time.
                Event::Start {
                    cpu: 3,
                    t_ns: t0 + 5,
                    work: 0xffff_8880_1234_5678,
                    pid: 4242,
                },
                Event::End {
                    t_ns: t0 + 5 + (1 << 30) + 7,
                    work: 0xffff_8880_1234_5678,
                },
                Event::Queue {
                    cpu: 3,
                    t_ns: t0 + 5 + (1 << 30) + 8,
                    work: 0xffff_8880_0000_0001,
                    queue: "fsverity_read_queue",
                    unbound: false,
                },
                Event::RqIssue {
                    t_ns: t0 + 5 + (1 << 30) + 10,
                    dev: (254, 3),
                    sector: 2048,
                    read: true,
                },
            ]
        );
    }

    #[test]
    fn lost_events_come_first_with_their_count_where_stored() {
        let l = layouts();
        let p = page(5, &[E::Data(1, exec_rec(334, 7, 1))], Some(12));
        let mut out = Vec::new();
        assert!(l.decode_page(&p, 1, &mut out));
        assert_eq!(
            out,
            vec![
                Event::Lost { cpu: 1, events: 12 },
                Event::End { t_ns: 6, work: 7 }
            ]
        );
        // Missed, count not stored: one.
        let mut p = page(5, &[], None);
        p[8..16].copy_from_slice(&MISSED_EVENTS.to_le_bytes());
        out.clear();
        assert!(l.decode_page(&p, 0, &mut out));
        assert_eq!(out, vec![Event::Lost { cpu: 0, events: 1 }]);
    }

    #[test]
    fn a_page_that_lies_about_its_length_stops_the_decoder_not_the_process() {
        let l = layouts();
        let mut p = page(5, &[E::Data(1, exec_rec(334, 7, 1))], None);
        p[8..16].copy_from_slice(&9000u64.to_le_bytes());
        assert!(!l.decode_page(&p, 0, &mut Vec::new()));
        // A record running past the committed data.
        let mut p = page(5, &[E::Long(1, exec_rec(334, 7, 1))], None);
        p[20..24].copy_from_slice(&4000u32.to_le_bytes());
        assert!(!l.decode_page(&p, 0, &mut Vec::new()));
        assert!(!l.decode_page(&p[..10], 0, &mut Vec::new()));
    }

    /// This machine's own formats parse, where tracefs is mounted.
    #[test]
    fn the_running_kernels_formats_parse() {
        let dir = Path::new("/sys/kernel/tracing");
        if !dir.join("events/header_page").exists() {
            eprintln!("SKIPPED the_running_kernels_formats_parse: tracefs is not mounted here");
            return;
        }
        let l = Layouts::read(dir).expect("the workqueue events' formats");
        assert_eq!(l.page.data, 16);
        assert!(l.queue.is_some() && l.start.is_some() && l.end.is_some());
    }
}
