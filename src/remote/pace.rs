//! What a run can produce, held against what an agent sends. The client
//! takes an agent's interval records only as fast and in the order the
//! agent's engine can make them, so a guest, phone or server that floods
//! the link (a valid line again and again, or numbers it made up) is ended
//! by its first impossible line, with the rule it broke, instead of filling
//! this machine's memory and recording. It is the same for ssh, adb and
//! lab (`vm:`) targets: all of them go through [`super::client`].
//!
//! The rules follow from how the engine's sampler works (one record per
//! tick, ticks an interval apart and never caught up, one more on stop;
//! its clock starts when the agent starts the workload, after the client
//! sent the start):
//!
//! - `seq` rises with each record (a gap is allowed, counted and said) and
//!   so does `t_s`;
//! - a record numbered `seq` ends no earlier than `seq` intervals into the
//!   run (`t_s >= seq x interval`);
//! - no record ends later than the time since the start was sent, with
//!   slack for a target clock that runs fast ([`FAST_CLOCK`]) and
//!   [`slack_s`].
//!
//! Together they hold the records of a run to one per interval of this
//! machine's clock plus the slack, however the agent numbers them, while a
//! record a slow link delayed (and that then comes in a burst with
//! others) is always taken: it is old, not early.

use std::time::Duration;

/// How much faster than this machine's clock the agent's may run: 10%
/// (NTP slews a clock by at most 0.05%; an emulated guest's may be off by
/// more).
pub const FAST_CLOCK: f64 = 1.1;

/// Seconds a record's end may be ahead of this machine's clock on top of
/// [`FAST_CLOCK`]: 5 s, or 50 intervals when that is longer.
pub fn slack_s(interval_s: f64) -> f64 {
    (50.0 * interval_s).max(5.0)
}

/// How long an agent may say nothing after the client asked it to stop
/// before the client gives up on its summary: 10 s, or 3 intervals when
/// that is longer (the agent tears its workload down before the summary:
/// about 2 s for the kernel target on a real machine, longer in an
/// emulated guest).
pub fn stop_silence(interval: Duration) -> Duration {
    (interval * 3).max(Duration::from_secs(10))
}

/// The rules each interval record of one agent's run is held to.
#[derive(Debug, Clone)]
pub struct Pace {
    /// The agent's interval, seconds (the milliseconds it was sent).
    interval_s: f64,
    /// The last record taken: its seq and t_s.
    last: Option<(u64, f64)>,
}

/// An interval written for a message: `100 ms`, `2 s`.
fn interval_text(s: f64) -> String {
    if s < 1.0 {
        format!("{} ms", (s * 1e3).round())
    } else {
        format!("{s} s")
    }
}

/// The rule an agent's interval record broke ([`Pace::take`]), with its
/// numbers (the caller adds the line).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PaceError {
    /// A seq not above the last one's.
    #[error(
        "interval seq {seq} after seq {last_seq}: records must come in order, each seq above the last"
    )]
    SeqOrder {
        /// The record's seq.
        seq: u64,
        /// The last record's.
        last_seq: u64,
    },
    /// An end time not after the last record's.
    #[error(
        "interval seq {seq} ends at t_s {t_s} s, not after seq {last_seq}'s {last_t} s: records must come in order, each t_s above the last"
    )]
    TimeOrder {
        /// The record's seq.
        seq: u64,
        /// Its end, s.
        t_s: f64,
        /// The last record's seq.
        last_seq: u64,
        /// Its end, s.
        last_t: f64,
    },
    /// More records by its end time than one per interval makes.
    #[error(
        "interval seq {seq} ends at t_s {t_s:.3} s, and a {} interval makes at most {} records (seq 0..={most_seq}) in that time: the agent is flooding",
        interval_text(*interval_s),
        most_seq + 1
    )]
    SeqAhead {
        /// The record's seq.
        seq: u64,
        /// Its end, s.
        t_s: f64,
        /// The run's interval, s.
        interval_s: f64,
        /// The highest seq allowed by then.
        most_seq: u64,
    },
    /// An end later than this machine's clock allows.
    #[error(
        "interval seq {seq} ends at t_s {t_s:.3} s, but the workload started at most {since_start_s:.3} s ago (allowed up to {most_t:.3} s, one {} interval at a time): the agent is flooding",
        interval_text(*interval_s)
    )]
    TimeAhead {
        /// The record's seq.
        seq: u64,
        /// Its end, s.
        t_s: f64,
        /// Seconds since the start was sent.
        since_start_s: f64,
        /// The latest end allowed, s.
        most_t: f64,
        /// The run's interval, s.
        interval_s: f64,
    },
}

impl Pace {
    /// The rules for a run of `interval_ms` milliseconds per interval (what
    /// the start request said).
    pub fn new(interval_ms: u64) -> Pace {
        Pace {
            interval_s: interval_ms.max(1) as f64 / 1e3,
            last: None,
        }
    }

    /// Takes the record `seq` ending at `t_s` (the agent's seconds), which
    /// arrived `since_start_s` seconds after the start was sent; the error
    /// says which rule it broke (without the line number).
    pub fn take(&mut self, seq: u64, t_s: f64, since_start_s: f64) -> Result<(), PaceError> {
        if let Some((last_seq, last_t)) = self.last {
            if seq <= last_seq {
                return Err(PaceError::SeqOrder { seq, last_seq });
            }
            if t_s <= last_t {
                return Err(PaceError::TimeOrder {
                    seq,
                    t_s,
                    last_seq,
                    last_t,
                });
            }
        }
        let interval_s = self.interval_s;
        // Records are numbered one per interval from 0: by t_s, at most
        // floor(t_s / interval) + 1 of them (the last one at stop).
        let most_seq = (t_s / self.interval_s + 1e-6).floor().max(0.0);
        if seq as f64 > most_seq {
            return Err(PaceError::SeqAhead {
                seq,
                t_s,
                interval_s,
                most_seq: most_seq as u64,
            });
        }
        let most_t = since_start_s.max(0.0) * FAST_CLOCK + slack_s(self.interval_s);
        if t_s > most_t {
            return Err(PaceError::TimeAhead {
                seq,
                t_s,
                since_start_s,
                most_t,
                interval_s,
            });
        }
        self.last = Some((seq, t_s));
        Ok(())
    }

    /// How many records a run may have made `since_start_s` seconds after
    /// its start was sent: what [`Pace::take`] lets through at most.
    pub fn most_records(&self, since_start_s: f64) -> u64 {
        ((since_start_s.max(0.0) * FAST_CLOCK + slack_s(self.interval_s)) / self.interval_s + 1e-6)
            .floor() as u64
            + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_again_is_refused_as_out_of_order() {
        let mut p = Pace::new(100);
        p.take(1, 0.2, 0.3).unwrap();
        assert_eq!(
            p.take(1, 0.2, 0.3).unwrap_err().to_string(),
            "interval seq 1 after seq 1: records must come in order, each seq above the last"
        );
        let mut p = Pace::new(100);
        p.take(1, 0.2, 0.3).unwrap();
        assert!(
            p.take(2, 0.2, 0.3)
                .unwrap_err()
                .to_string()
                .contains("not after seq 1's 0.2 s"),
        );
    }

    #[test]
    fn a_seq_ahead_of_its_time_or_a_time_ahead_of_the_clock_is_flooding() {
        let mut p = Pace::new(100);
        let e = p.take(412, 1.0, 1.0).unwrap_err().to_string();
        assert_eq!(
            e,
            "interval seq 412 ends at t_s 1.000 s, and a 100 ms interval makes at most 11 records (seq 0..=10) in that time: the agent is flooding"
        );
        let mut p = Pace::new(100);
        let e = p.take(9000, 900.0, 1.0).unwrap_err().to_string();
        assert_eq!(
            e,
            "interval seq 9000 ends at t_s 900.000 s, but the workload started at most 1.000 s ago (allowed up to 6.100 s, one 100 ms interval at a time): the agent is flooding"
        );
    }

    #[test]
    fn the_engines_own_numbering_passes_with_gaps_late_records_and_the_stop() {
        // Ticks an interval apart, one late (the next closer), a gap, the
        // stop's record just after a tick: all taken.
        let mut p = Pace::new(100);
        for (seq, t) in [
            (0, 0.1),
            (1, 0.2),
            (2, 0.399),
            (3, 0.4),
            (5, 0.6),
            (6, 0.6001),
        ] {
            p.take(seq, t, 0.0).unwrap();
        }
        // A whole run's records delivered at once, long after (a slow link).
        let mut p = Pace::new(10);
        for seq in 0..10_000u64 {
            p.take(seq, (seq + 1) as f64 * 0.01, 200.0).unwrap();
        }
        // The floating-point product of seq and interval is no obstacle.
        let mut p = Pace::new(30);
        p.take(7, 7.0 * 0.03, 0.0).unwrap();
    }

    #[test]
    fn what_passes_is_at_most_one_record_per_interval_plus_the_slack() {
        // Whatever numbers an agent makes up, the records taken by time T
        // are at most most_records(T).
        for ms in [10u64, 100, 1000, 60_000] {
            let p0 = Pace::new(ms);
            for since in [0.0, 1.0, 20.0, 3600.0] {
                let most = p0.most_records(since);
                let mut p = p0.clone();
                let every = ms as f64 / 1e3;
                // The densest numbering the rules allow.
                let mut taken = 0u64;
                for seq in 0..most + 10 {
                    let t = (seq as f64 * every).max(1e-9 * (seq + 1) as f64);
                    if p.take(seq, t, since).is_ok() {
                        taken += 1;
                    }
                }
                assert!(taken <= most, "{ms} ms at {since} s: {taken} > {most}");
                // And no fewer than the engine makes.
                assert!(most as f64 >= since / every, "{ms} ms at {since} s: {most}");
            }
        }
        assert_eq!(Pace::new(100).most_records(20.0), 271);
    }

    #[test]
    fn the_stop_waits_for_a_silence_of_ten_seconds_or_three_intervals() {
        assert_eq!(
            stop_silence(Duration::from_millis(100)),
            Duration::from_secs(10)
        );
        assert_eq!(
            stop_silence(Duration::from_secs(60)),
            Duration::from_secs(180)
        );
        assert_eq!(slack_s(0.1), 5.0);
        assert_eq!(slack_s(1.0), 50.0);
    }
}
