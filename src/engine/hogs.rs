//! The background CPU hogs (`load.hogs`, `load.hog_nice`): busy threads
//! that compete with the pipeline for CPUs, so run-queue delay can be
//! studied under load. Apart from the engine's lifecycle because they share
//! nothing with it but the notice sink and the registry: while tracing, a
//! hog records its time on each CPU (it looks at the clock every ~10 us; a
//! longer gap is time something else ran there).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use crate::metrics::{Recorder, Registry, Role, Span, SpanKind, now_ns};

use super::NoticeSink;

/// Multiply-adds a hog does between two looks at the clock (~10 us).
const SPINS: u32 = 10_000;
/// A gap between two looks longer than this: the hog was off its CPU
/// (something else ran there).
const OFF_CPU_NS: u64 = 50_000;
/// A hog's span is handed on at least this often, so a hog that is never
/// preempted still shows in each interval.
const MAX_SPAN_NS: u64 = 10_000_000;

/// A hog's span so far, while tracing: since when it has been seen on
/// which CPU, and when last.
#[derive(Default)]
struct Seen {
    open: Option<(Span, u64)>,
}

impl Seen {
    /// One look: on the same CPU without a gap, the span goes on; else the
    /// span ends where the hog was last seen, and a new one starts.
    fn look(&mut self, rec: &mut Recorder) {
        let now = now_ns();
        let cpu = crate::sys::current_cpu();
        if let Some((span, last)) = self.open
            && (span.cpu as usize != cpu
                || now - last > OFF_CPU_NS
                || now - span.start_ns > MAX_SPAN_NS)
        {
            rec.spans.push(span.ended(last));
            self.open = None;
        }
        match &mut self.open {
            Some((_, last)) => *last = now,
            None => self.open = Some((Span::here(SpanKind::Hog, now), now)),
        }
    }

    /// Hands on the span still open (tracing ended, or the hog stops).
    fn close(&mut self, rec: &mut Recorder) {
        if let Some((span, last)) = self.open.take() {
            rec.spans.push(span.ended(last));
        }
    }
}

/// The running hogs, and the count, nice and CPUs they were started with.
pub(super) struct Hogs {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    count: u32,
    nice: i32,
    cpus: Vec<usize>,
}

impl Hogs {
    pub(super) fn none() -> Hogs {
        Hogs {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            count: 0,
            nice: 0,
            cpus: Vec::new(),
        }
    }

    /// `count` hogs at `nice`, each allowed the CPUs the run may use
    /// (`cpus`, `workload.cpus`; the scheduler spreads them).
    pub(super) fn set(
        &mut self,
        count: u32,
        nice: i32,
        cpus: &[usize],
        notices: &NoticeSink,
        registry: &Arc<Registry>,
    ) -> std::io::Result<()> {
        if count == self.count && ((nice == self.nice && cpus == self.cpus) || count == 0) {
            return Ok(());
        }
        self.stop_all();
        notices.forget_refused(crate::key!(load.hog_nice));
        self.stop = Arc::new(AtomicBool::new(false));
        self.count = count;
        self.nice = nice;
        self.cpus = cpus.to_vec();
        for i in 0..count {
            let stop = self.stop.clone();
            let notices = notices.clone();
            let registry = registry.clone();
            let cpus = self.cpus.clone();
            let h = std::thread::Builder::new()
                .name(format!("hog-{i}"))
                .spawn(move || {
                    if !cpus.is_empty()
                        && let Err(e) = crate::sys::pin_current_thread(&cpus)
                    {
                        notices.push(format!(
                            "load.hogs: hog-{i} could not keep to its CPUs: {e}"
                        ));
                    }
                    if let Err(e) = crate::sys::set_current_thread_nice(nice) {
                        notices.refused(super::resolve::Refused::HogNice(e.to_string()));
                    }
                    let mut h = registry.register(Role::Hog);
                    let mut seen = Seen::default();
                    let mut x = 0x1234_5678_u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..SPINS {
                            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                        }
                        std::hint::black_box(x);
                        if crate::metrics::tracing() {
                            seen.look(&mut h.rec);
                        }
                        h.tick();
                    }
                    seen.close(&mut h.rec);
                })?;
            self.threads.push(h);
        }
        Ok(())
    }

    pub(super) fn stop_all(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
        self.count = 0;
    }
}
