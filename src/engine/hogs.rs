//! The background CPU hogs (`load.hogs`, `load.hog_nice`): busy threads
//! that compete with the pipeline for CPUs, so run-queue delay can be
//! studied under load. Apart from the engine's lifecycle because they share
//! nothing with it but the notice sink.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use super::NoticeSink;

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
                    let mut x = 0x1234_5678_u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..10_000 {
                            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                        }
                        std::hint::black_box(x);
                    }
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
