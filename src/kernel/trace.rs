//! The kernel's own workqueues, observed through their tracepoints: what
//! the model's queue latency is to be held against.
//!
//! A [`Tracer`] makes a tracefs instance of its own
//! (`/sys/kernel/tracing/instances/readpath-PID`), so the global trace
//! buffer and whatever else traces the machine are untouched. It enables
//! `workqueue:workqueue_queue_work`, `workqueue_execute_start` and
//! `workqueue_execute_end` there, with a filter keeping only the post-read
//! queues, and reads `trace_pipe` on a thread. Each item is followed by its
//! work pointer: queue latency is queued -> started (the 2023 fsverity
//! patch's "workqueue scheduler latency"), execution is started -> ended,
//! and the CPU that queued it is compared with the CPU that ran it. The
//! instance is recorded in `DATA_DIR/kernel/state.json` before it is made
//! and removed on drop, or after a crash by `kernel::restore`.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use hdrhistogram::Histogram;

/// The post-read queues of ext4, f2fs and blk-crypto.
pub const POST_READ_QUEUES: &[&str] = &[
    "fscrypt_read_queue",
    "fsverity_read_queue",
    "blk_crypto_wq",
    "f2fs_post_read_wq",
];

/// The tracepoints a [`Tracer`] enables (under `events/workqueue/`).
pub const EVENTS: &[&str] = &[
    "workqueue_queue_work",
    "workqueue_execute_start",
    "workqueue_execute_end",
];

/// Where tracefs is mounted.
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// One queue's items over the trace.
#[derive(Debug, Clone)]
pub struct QueueTrace {
    /// Items that were queued and ran to the end within the trace.
    pub items: u64,
    /// Queued -> started, ns.
    pub queue_ns: Histogram<u64>,
    /// Started -> ended, ns.
    pub exec_ns: Histogram<u64>,
    /// Items that ran on another CPU than the one that queued them.
    pub moved: u64,
}

impl QueueTrace {
    fn new() -> QueueTrace {
        let h = || Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("static bounds");
        QueueTrace {
            items: 0,
            queue_ns: h(),
            exec_ns: h(),
            moved: 0,
        }
    }
}

/// One parsed trace line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<'a> {
    /// `workqueue_queue_work` on `cpu` at `t_ns`.
    Queue {
        /// Logged on this CPU.
        cpu: u32,
        /// Timestamp, ns.
        t_ns: u64,
        /// The work pointer.
        work: &'a str,
        /// The workqueue's name.
        queue: &'a str,
    },
    /// `workqueue_execute_start`.
    Start {
        /// Logged on this CPU.
        cpu: u32,
        /// Timestamp, ns.
        t_ns: u64,
        /// The work pointer.
        work: &'a str,
    },
    /// `workqueue_execute_end`.
    End {
        /// Timestamp, ns.
        t_ns: u64,
        /// The work pointer.
        work: &'a str,
    },
}

/// Parses one `trace_pipe` line of the three events; None for others.
/// `  kworker/u8:2-57  [001] ..... 1234.567890: workqueue_queue_work: work struct=... function=... workqueue=... req_cpu=... cpu=...`
pub fn parse_line(line: &str) -> Option<Event<'_>> {
    let open = line.find(" [")?;
    let close = open + line[open..].find(']')?;
    let cpu: u32 = line[open + 2..close].trim().parse().ok()?;
    let rest = &line[close + 1..];
    let colon = rest.find(": ")?;
    let t_ns = parse_ts(rest[..colon].split_whitespace().last()?)?;
    let rest = &rest[colon + 2..];
    let (name, args) = rest.split_once(": ")?;
    match name {
        "workqueue_queue_work" => {
            let field = |k: &str| {
                args.split_whitespace()
                    .find_map(|f| f.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
            };
            Some(Event::Queue {
                cpu,
                t_ns,
                work: field("struct")?,
                queue: field("workqueue")?,
            })
        }
        "workqueue_execute_start" | "workqueue_execute_end" => {
            let work = args.strip_prefix("work struct ")?.split(':').next()?.trim();
            Some(if name == "workqueue_execute_start" {
                Event::Start { cpu, t_ns, work }
            } else {
                Event::End { t_ns, work }
            })
        }
        _ => None,
    }
}

/// "1234.567890" (seconds, microseconds) -> ns.
fn parse_ts(s: &str) -> Option<u64> {
    let (sec, frac) = s.split_once('.')?;
    let sec: u64 = sec.parse().ok()?;
    if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac_ns: u64 = frac.parse::<u64>().ok()? * 10u64.pow(9 - frac.len() as u32);
    sec.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// Follows items from their events and fills per-queue statistics.
#[derive(Default)]
pub struct Aggregator {
    queued: HashMap<String, (u64, u32, String)>,
    running: HashMap<String, (u64, String)>,
    /// Per queue.
    pub queues: HashMap<String, QueueTrace>,
}

impl Aggregator {
    /// Takes one event.
    pub fn add(&mut self, e: &Event<'_>) {
        match *e {
            Event::Queue {
                cpu,
                t_ns,
                work,
                queue,
            } => {
                self.queued
                    .insert(work.to_string(), (t_ns, cpu, queue.to_string()));
            }
            Event::Start { cpu, t_ns, work } => {
                if let Some((tq, qcpu, queue)) = self.queued.remove(work) {
                    let q = self
                        .queues
                        .entry(queue.clone())
                        .or_insert_with(QueueTrace::new);
                    let _ = q.queue_ns.record(t_ns.saturating_sub(tq).max(1));
                    if qcpu != cpu {
                        q.moved += 1;
                    }
                    self.running.insert(work.to_string(), (t_ns, queue));
                }
            }
            Event::End { t_ns, work } => {
                if let Some((ts, queue)) = self.running.remove(work)
                    && let Some(q) = self.queues.get_mut(&queue)
                {
                    let _ = q.exec_ns.record(t_ns.saturating_sub(ts).max(1));
                    q.items += 1;
                }
            }
        }
    }
}

/// A tracefs instance following the post-read queues until dropped.
pub struct Tracer {
    dir: PathBuf,
    stop: Arc<AtomicBool>,
    agg: Arc<Mutex<Aggregator>>,
    thread: Option<std::thread::JoinHandle<()>>,
    state: PathBuf,
}

fn write(path: &Path, v: &str) -> io::Result<()> {
    std::fs::write(path, v)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

impl Tracer {
    /// Starts tracing the post-read queues in an instance of its own,
    /// recorded under `data_dir` first. Needs root (or tracefs access) and
    /// a mounted tracefs; the error says which is missing.
    pub fn start(data_dir: &Path) -> io::Result<Tracer> {
        let events = Path::new(TRACEFS).join("events/workqueue/workqueue_queue_work");
        if !events.exists() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{} has no workqueue tracepoints: mount tracefs (mount -t tracefs nodev {TRACEFS}) as root",
                    events.display()
                ),
            ));
        }
        let dir = Path::new(TRACEFS)
            .join("instances")
            .join(format!("readpath-{}", std::process::id()));
        let state = super::record_state(data_dir, &dir)?;
        std::fs::create_dir(&dir)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        let mut t = Tracer {
            dir,
            stop: Arc::new(AtomicBool::new(false)),
            agg: Arc::new(Mutex::new(Aggregator::default())),
            thread: None,
            state,
        };
        let filter = POST_READ_QUEUES
            .iter()
            .map(|q| format!("workqueue == \"{q}\""))
            .collect::<Vec<_>>()
            .join(" || ");
        let ev = t.dir.join("events/workqueue");
        write(&ev.join("workqueue_queue_work/filter"), &filter)?;
        for e in EVENTS {
            write(&ev.join(e).join("enable"), "1")?;
        }
        write(&t.dir.join("tracing_on"), "1")?;
        // Non-blocking, so the reader sees `stop` within a few ms and
        // closes the pipe before the instance is removed.
        let pipe = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(t.dir.join("trace_pipe"))?;
        let (stop, agg) = (t.stop.clone(), t.agg.clone());
        t.thread = Some(
            std::thread::Builder::new()
                .name("tracer".into())
                .spawn(move || {
                    let mut r = BufReader::with_capacity(1 << 16, pipe);
                    let mut line = String::new();
                    let mut drained = false;
                    loop {
                        match r.read_line(&mut line) {
                            Ok(0) => break,
                            Ok(_) if line.ends_with('\n') => {
                                if let Some(e) = parse_line(&line) {
                                    agg.lock().unwrap_or_else(|e| e.into_inner()).add(&e);
                                }
                                line.clear();
                            }
                            // A partial line: the rest comes with the next read.
                            Ok(_) => {}
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                                // Stopped: one more pass drains what is left.
                                if stop.load(Ordering::SeqCst) {
                                    if drained {
                                        break;
                                    }
                                    drained = true;
                                }
                                std::thread::sleep(std::time::Duration::from_millis(5));
                            }
                            Err(_) => break,
                        }
                    }
                })?,
        );
        Ok(t)
    }

    /// Stops, removes the instance and returns what was seen.
    pub fn finish(mut self) -> HashMap<String, QueueTrace> {
        self.teardown();
        std::mem::take(&mut self.agg.lock().unwrap_or_else(|e| e.into_inner()).queues)
    }

    fn teardown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = write(&self.dir.join("tracing_on"), "0");
        for e in EVENTS {
            let _ = write(
                &self.dir.join("events/workqueue").join(e).join("enable"),
                "0",
            );
        }
        // The reader sees `stop` within a few ms and closes the pipe (an
        // instance cannot be removed while its pipe is open).
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        if !self.dir.exists() {
            let _ = std::fs::remove_file(&self.state);
        }
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        if self.thread.is_some() || self.dir.exists() {
            self.teardown();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_lines_parse_and_items_are_followed() {
        let lines = [
            "   kworker/1:1H-88      [001] d..1.   100.000010: workqueue_queue_work: work struct=00000000aabbccdd function=fscrypt_decrypt_bio workqueue=fscrypt_read_queue req_cpu=8192 cpu=4294967295",
            "  kworker/u9:0-70       [000] .....   100.000060: workqueue_execute_start: work struct 00000000aabbccdd: function fscrypt_decrypt_bio",
            "  kworker/u9:0-70       [000] .....   100.000160: workqueue_execute_end: work struct 00000000aabbccdd: function fscrypt_decrypt_bio",
            "          <idle>-0      [001] d.h1.   100.000200: workqueue_queue_work: work struct=0000000011112222 function=verity_work workqueue=fsverity_read_queue req_cpu=1 cpu=1",
            "  kworker/1:2H-99       [001] .....   100.001200: workqueue_execute_start: work struct 0000000011112222: function verity_work",
            "  kworker/1:2H-99       [001] .....   100.001210: workqueue_execute_end: work struct 0000000011112222: function verity_work",
            "# tracer: nop",
            "garbage [x] no",
        ];
        assert_eq!(
            parse_line(lines[0]),
            Some(Event::Queue {
                cpu: 1,
                t_ns: 100_000_010_000,
                work: "00000000aabbccdd",
                queue: "fscrypt_read_queue"
            })
        );
        assert_eq!(parse_line(lines[6]), None);
        assert_eq!(parse_line(lines[7]), None);
        let mut a = Aggregator::default();
        for l in lines {
            if let Some(e) = parse_line(l) {
                a.add(&e);
            }
        }
        let f = &a.queues["fscrypt_read_queue"];
        assert_eq!((f.items, f.moved), (1, 1));
        assert!((49_900..=50_100).contains(&f.queue_ns.value_at_quantile(0.5)));
        assert!((99_900..=100_100).contains(&f.exec_ns.value_at_quantile(0.5)));
        let v = &a.queues["fsverity_read_queue"];
        assert_eq!((v.items, v.moved), (1, 0));
        assert!((999_000..=1_001_000).contains(&v.queue_ns.value_at_quantile(0.5)));
        assert_eq!(parse_ts("1.5"), Some(1_500_000_000));
        assert_eq!(parse_ts("1.x"), None);
    }
}
