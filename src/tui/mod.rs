//! The live explorer: a full-screen terminal app over a running workload
//! (the local [`crate::engine::Engine`], or an agent on another machine).
//!
//! The loop owns the terminal and the engine. It drains the engine's
//! interval records into the [`App`] (never blocking the engine: records
//! queue on a channel the sampler never waits on), draws when something
//! changed, at most `--fps` times a second (and at once after a key, so a
//! changed setting shows immediately), and turns keys into [`Action`]s that
//! call [`Workload::apply`]; mouse events go to [`mouse::mouse`]. The
//! terminal (raw mode, the alternate screen and, unless `--no-mouse`, mouse
//! reporting) is taken in one place, [`take_terminal`], and given back in
//! one, [`leave_terminal`], which every way out goes through: quit, an
//! error, a panic (a hook of ours), SIGINT, SIGTERM, SIGHUP and SIGQUIT (a
//! flag the loop polls every few ms), and before the process stops on
//! Ctrl-Z or SIGTSTP (taken back, mouse included, and redrawn on `fg`).
//! A terminal that goes away (its window closed, `tmux kill-pane`) is a
//! normal way to end: the loop returns [`Ending::TerminalGone`], the caller
//! finishes the recording and prints nothing; no write to the lost terminal
//! may panic.

pub(crate) mod ab;
pub mod app;
pub(crate) mod demo;
#[cfg(any(test, feature = "testing"))]
pub mod fixture;
pub mod help;
pub(crate) mod input;
pub(crate) mod keys;
pub mod mouse;
pub mod overlay;
pub(crate) mod policy;
pub mod render;
pub mod replay;
pub mod state;
pub mod sweep_view;
pub mod text;
pub mod theme;

use std::time::{Duration, Instant};

use input::Input;
use ratatui::crossterm::event::{self, Event};
use ratatui::crossterm::{cursor, execute, terminal};

use crate::engine::workload::Workload;
use crate::scenario::preset;
use app::App;
use keys::Action;
use overlay::OverlayAction;
use render::Look;
use state::{Overlay, PickItem};
use theme::{Theme, ThemeName};

/// Highest refresh rate accepted.
pub const MAX_FPS: f64 = 30.0;
/// Refresh rate by default.
pub const DEFAULT_FPS: f64 = 4.0;
/// How long after a stop and `fg` every frame is a full repaint.
const REPAINT_AFTER_CONTINUE: Duration = Duration::from_secs(2);

/// How the explorer looks and runs.
#[derive(Debug, Clone)]
pub struct TuiOptions {
    /// Frames per second (0.5..=30).
    pub fps: f64,
    /// ASCII only (no Braille, no box drawing).
    pub ascii: bool,
    /// Palette.
    pub theme: ThemeName,
    /// Quit by itself after this long (benchmarks, demos).
    pub duration: Option<Duration>,
    /// The preset the workload started from: name and description.
    pub preset: Option<(String, String)>,
    /// Start in presentation mode.
    pub present: bool,
    /// Report the mouse (clicks, the wheel); `--no-mouse` leaves the
    /// terminal's own text selection alone.
    pub mouse: bool,
}

/// How the explorer's loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The user quit (or `--duration` ran out).
    Quit,
    /// A stop signal (SIGINT, SIGTERM, SIGQUIT).
    Signal(i32),
    /// The terminal was hung up or closed: nothing more can be shown.
    TerminalGone,
}

type Term = ratatui::Terminal<ratatui::backend::CrosstermBackend<std::io::Stdout>>;

/// Raw mode, the alternate screen, the mouse if `mouse`, and a terminal
/// over stdout.
fn enter_terminal(mouse: bool) -> std::io::Result<Term> {
    take_terminal(mouse)?;
    ratatui::Terminal::new(ratatui::backend::CrosstermBackend::new(std::io::stdout()))
}

/// Mouse reporting: button presses and releases, the wheel (1000), in SGR
/// form (1006). Not motion (1003): a moving pointer would wake the loop
/// for nothing.
const MOUSE_ON: &str = "\x1b[?1000h\x1b[?1006h";
/// Mouse reporting off: every mode a terminal may have been left in
/// (button, drag, motion, urxvt and SGR forms), so the shell gets a
/// terminal that reports nothing, whatever was on.
const MOUSE_OFF: &str = "\x1b[?1006l\x1b[?1015l\x1b[?1003l\x1b[?1002l\x1b[?1000l";

/// Raw mode, the alternate screen, and mouse reporting if `mouse` (again,
/// after a stop): the one place the terminal is taken.
fn take_terminal(mouse: bool) -> std::io::Result<()> {
    use std::io::Write;
    terminal::enable_raw_mode()?;
    execute!(std::io::stdout(), terminal::EnterAlternateScreen)?;
    if mouse {
        let mut out = std::io::stdout();
        out.write_all(MOUSE_ON.as_bytes())?;
        out.flush()?;
    }
    Ok(())
}

/// Gives the terminal back as it was: mouse reporting off, cooked mode,
/// main screen, cursor: the one place it is given back (quit, error, panic,
/// signals, suspend). Mouse reporting is turned off whether or not it was
/// on (harmless when it was not: a panic hook cannot know). Errors are
/// ignored: the terminal may be gone.
fn leave_terminal() {
    use std::io::Write;
    let mut out = std::io::stdout();
    let _ = out.write_all(MOUSE_OFF.as_bytes());
    let _ = out.flush();
    let _ = terminal::disable_raw_mode();
    let _ = execute!(out, terminal::LeaveAlternateScreen, cursor::Show);
}

/// Restores the terminal before a panic's message is printed (once).
fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            leave_terminal();
            previous(info);
        }));
    });
}

/// Drops the terminal without a write that could panic: ratatui's drop
/// prints to stderr (and `eprintln!` panics) when it cannot show the cursor
/// of a terminal that went away.
fn release(mut term: Term, gone: bool) {
    if gone || term.show_cursor().is_err() {
        std::mem::forget(term);
    }
}

/// Measures the UI thread: CPU % over the last second and frame time.
struct CostMeter {
    since: Instant,
    cpu_at: u64,
    frames: u32,
    draw_ns: u64,
}

impl CostMeter {
    fn new() -> Self {
        CostMeter {
            since: Instant::now(),
            cpu_at: crate::sys::thread_cpu_time_ns(),
            frames: 0,
            draw_ns: 0,
        }
    }

    fn frame(&mut self, took: Duration, app: &mut App) {
        self.frames += 1;
        self.draw_ns += took.as_nanos() as u64;
        let wall = self.since.elapsed();
        if wall >= Duration::from_secs(1) {
            let cpu = crate::sys::thread_cpu_time_ns();
            app.view.measured(
                (cpu - self.cpu_at) as f64 / wall.as_nanos() as f64 * 100.0,
                self.draw_ns as f64 / self.frames as f64 / 1e6,
            );
            *self = CostMeter::new();
        }
    }
}

/// What feeds the explorer: a live engine, or a recording being replayed.
pub trait Driver {
    /// Takes in the records that arrived since the last call; true if any.
    fn poll(&mut self, app: &mut App) -> bool;
    /// Handles a key.
    fn key(&mut self, app: &mut App, key: event::KeyEvent);
    /// Handles a mouse event.
    fn mouse(&mut self, app: &mut App, ev: event::MouseEvent);
}

/// Where the explorer writes its intervals besides the screen: a
/// recording and a Perfetto trace, each given back when it ends (a
/// failing one stops, said in a popup).
#[derive(Default)]
pub struct Outputs {
    /// The recording (`--record`).
    pub recording: Option<crate::output::recording::Writer>,
    /// The trace (`--trace`): the workload traces for as long as it is
    /// written, the timeline open or not.
    pub trace: Option<crate::output::experiment::TraceFile>,
    /// `--timeline`: the workload traces for the whole run, its spans
    /// kept in the recording.
    pub timeline: bool,
    /// Opens the trace `T` starts (a new file, made by the command that
    /// runs the explorer), named by `label`: its path and its writer.
    /// None: `T` has nothing to write into here.
    pub new_trace: Option<NewTrace>,
    /// Where a trace started with `T` goes (None: the trace, if any, is
    /// `--trace`'s, for the whole run).
    pub keyed: Option<std::path::PathBuf>,
}

/// Opens a trace for `T`, named by its label: its path and its writer.
pub type NewTrace =
    Box<dyn Fn(&str) -> Result<(std::path::PathBuf, crate::output::experiment::TraceFile), String>>;

/// The live engine, optionally recording every interval.
pub struct EngineDriver<'a> {
    /// The running engine.
    pub engine: &'a mut dyn Workload,
    /// Where the intervals go besides the screen.
    pub out: Outputs,
}

impl Driver for EngineDriver<'_> {
    fn poll(&mut self, app: &mut App) -> bool {
        let (mut any, mut noticed) = (false, false);
        while let Ok(rec) = self.engine.records().try_recv() {
            if let Some(w) = self.out.recording.as_mut()
                && let Err(e) = w.record(&rec)
            {
                app.overlays.error(format!("recording stopped: {e}"));
                self.out.recording = None;
            }
            if let Some(t) = self.out.trace.as_mut()
                && let Err(e) = t.interval(&rec)
            {
                app.overlays.error(format!("the trace stopped: {e}"));
                self.out.trace = None;
                self.out.keyed = None;
                app.lanes.pin(self.out.timeline);
            }
            noticed |= !rec.notices.is_empty();
            app.push(rec);
            any = true;
        }
        if noticed {
            // A notice may be a refusal at run time (a worker's nice -20):
            // what runs changed with it, and the settings grey out now.
            let effective = self.engine.effective();
            if &effective != app.running.effective() {
                app.running.set(self.engine.settings().clone(), effective);
                app.running.set_pods(self.engine.pods());
            }
        }
        if any {
            ab_tick(app, self.engine);
        }
        if app.running.moved_to(self.engine.place()) {
            any = true;
        }
        if app.running.lost().is_none()
            && let Some(why) = self.engine.lost()
        {
            let now = app.window.elapsed_s();
            app.log.line(now, format!("connection lost: {why}"), true);
            app.flash("connection lost: R reconnects (the charts stay)");
            app.running.lose(why);
            any = true;
        }
        any
    }

    fn key(&mut self, app: &mut App, key: event::KeyEvent) {
        if !app.overlays.is_open() && policy::key_action(&app.running, key) == Action::ToggleTrace {
            self.toggle_trace(app);
            return;
        }
        handle_key(app, self.engine, key);
    }

    fn mouse(&mut self, app: &mut App, ev: event::MouseEvent) {
        let what = mouse::mouse(app, ev, true);
        overlay_done(app, self.engine, what);
    }
}

impl EngineDriver<'_> {
    /// `T`: starts a Perfetto trace in a new file here
    /// (`readpath-DATE.pftrace`, never an existing one) and has the
    /// workload trace, or finishes the one `T` started and says what it
    /// holds; a trace of `--trace` runs for the whole run.
    fn toggle_trace(&mut self, app: &mut App) {
        let now = app.window.elapsed_s();
        if self.out.trace.is_some() && self.out.keyed.is_none() {
            app.flash(
                "a trace is written for the whole run (--trace FILE): it is finished on quit",
            );
            return;
        }
        if let Some(t) = self.out.trace.take() {
            let path = self.out.keyed.take().unwrap_or_default();
            let said = t
                .finish()
                .map_err(|e| e.to_string())
                .and_then(|(f, stats)| {
                    f.finish().map_err(|e| e.to_string())?;
                    Ok(stats)
                });
            let shown = crate::sys::printable(&path.display().to_string(), false);
            let line = match said {
                Ok(stats) => {
                    let mut l = format!(
                        "trace {shown}: {} work items, {}; open it in ui.perfetto.dev",
                        stats.items,
                        crate::metrics::format::human_bytes(stats.bytes)
                    );
                    if let Some(note) = stats.dropped_note() {
                        l.push_str(&format!(" ({note})"));
                    }
                    l
                }
                Err(e) => format!("trace {shown}: not written: {e}"),
            };
            app.log.line(now, line.clone(), false);
            app.flash(line);
            app.lanes.pin(self.out.timeline);
            let _ = self.engine.trace(app.lanes.is_open() || self.out.timeline);
            return;
        }
        match self.start_trace(app) {
            Ok(path) => {
                let shown = crate::sys::printable(&path.display().to_string(), false);
                app.lanes.pin(true);
                let note = self.engine.trace(true).err();
                let line = match note {
                    Some(why) => format!("tracing to {shown} ({why}); T stops and writes it"),
                    None => format!("tracing to {shown}: T stops and writes it"),
                };
                app.log.line(now, line.clone(), false);
                app.flash(line);
                self.out.keyed = Some(path);
            }
            Err(e) => app.flash(format!("T: no trace: {e}")),
        }
    }

    /// Opens the new trace (through the command's `new_trace`) and starts
    /// its run.
    fn start_trace(&mut self, app: &App) -> Result<std::path::PathBuf, String> {
        let open = self
            .out
            .new_trace
            .as_ref()
            .ok_or("no trace can be written here")?;
        let label = format!(
            "readpath: explorer, traced from {:.1} s",
            app.window.elapsed_s()
        );
        let (path, w) = open(&label)?;
        self.out.trace = Some(w);
        Ok(path)
    }
}

/// Runs the explorer over a live engine until the user quits (or a signal,
/// or `duration`); the terminal is restored when it returns, and the caller
/// stops the engine and finishes the recording.
pub fn run(
    engine: &mut dyn Workload,
    opts: &TuiOptions,
    out: Outputs,
    script: Option<crate::scenario::demo::Demo>,
) -> std::io::Result<(Outputs, Ending)> {
    let mut app = App::new(
        engine.settings().clone(),
        engine.effective().clone(),
        engine.features().clone(),
        crate::sys::online_cpus().len(),
    );
    app.running.set_pods(engine.pods());
    app.running.moved_to(engine.place());
    let m = engine.machine();
    app.running
        .set_idle(m.idle_and_freq_short(), !m.iowait_consumers().is_empty());
    // Said when `workload.sleep` first changes, where it matters, not as
    // the first thing a newcomer reads.
    app.running.set_iowait_note(m.iowait_notice());
    if let Some((name, description)) = &opts.preset {
        app.log
            .line(0.0, format!("preset {name}: {description}"), false);
        app.show.apply_preset(name, description);
    }
    if out.trace.is_some() || out.timeline {
        // A trace file, or spans for the recording: the workload traces
        // from the start to the end.
        app.lanes.pin(true);
        if let Err(why) = engine.trace(true) {
            app.log.line(0.0, format!("trace: {why}"), true);
        }
    }
    let driver = EngineDriver { engine, out };
    match script {
        None => {
            let mut driver = driver;
            app.log.show_hint();
            let ending = run_with(&mut driver, &mut app, opts)?;
            Ok((driver.out, ending))
        }
        Some(d) => {
            app.log
                .line(0.0, format!("demo {}: {}", d.name, d.description), false);
            app.show.set_headline(d.headline.clone());
            app.window.fit_demo(d.length().as_secs_f64());
            let mut driver = demo::DemoDriver::new(driver, d);
            let ending = run_with(&mut driver, &mut app, opts)?;
            Ok((driver.inner.out, ending))
        }
    }
}

/// The terminal loop: draws `app`, feeds it from `driver`, hands keys to it.
pub fn run_with(
    driver: &mut dyn Driver,
    app: &mut App,
    opts: &TuiOptions,
) -> std::io::Result<Ending> {
    crate::sys::install_terminal_handlers();
    install_panic_hook();
    let look = Look {
        theme: Theme::named(opts.theme),
        ascii: opts.ascii,
    };
    app.view.set_fps(opts.fps);
    if opts.present {
        app.view.set_present(true);
    }
    let mut pace = Pace::new(opts.fps);
    let mut terminal = match enter_terminal(opts.mouse) {
        Ok(t) => t,
        Err(e) => {
            leave_terminal();
            return Err(e);
        }
    };
    let mut events = Vec::new();
    let ending = (|| -> Ending {
        loop {
            if driver.poll(app) {
                pace.dirty = true;
            }
            if let Some(ending) = pace.signals(&mut terminal, app, opts) {
                return ending;
            }
            let due = match pace.draw(&mut terminal, app, &look) {
                Ok(due) => due,
                Err(ending) => return ending,
            };
            // Wake for input, the next frame, or a record/signal check.
            let wait = if pace.dirty {
                due.saturating_duration_since(Instant::now())
            } else {
                Duration::from_millis(50)
            }
            .min(Duration::from_millis(50));
            events.clear();
            match input::read_events(wait.as_millis() as i32, &mut events) {
                Input::Idle => {}
                Input::Gone => return Ending::TerminalGone,
                Input::Keys => pace.input(&events, &mut terminal, driver, app, opts),
            }
            if crate::sys::take_resized() {
                pace.urgent = true;
            }
        }
    })();
    leave_terminal();
    release(terminal, ending == Ending::TerminalGone);
    Ok(ending)
}

/// When the event loop draws: a frame when something changed (a record, a
/// key, a resize, the clock's second), at most `fps` times a second; a key
/// is answered at once. Identical frames are not drawn at all.
struct Pace {
    /// The shortest time between two frames.
    frame_every: Duration,
    /// When the loop started.
    started: Instant,
    /// When the last frame was drawn.
    last_frame: Option<Instant>,
    /// Something changed since the last frame.
    dirty: bool,
    /// Draw at once (a key, a resize, a continue).
    urgent: bool,
    /// The clock's second the last frame showed.
    shown_second: u64,
    /// After a stop and `fg`, every frame is a full repaint for a while: the
    /// SIGCONT handler runs on whichever thread the kernel picks, possibly
    /// after the first redraw, and the shell or terminal may still be
    /// settling; a diff drawn onto a screen cleared behind ratatui's back
    /// would leave the panels' static parts blank.
    repaint_until: Option<Instant>,
    /// What the frames cost.
    meter: CostMeter,
}

impl Pace {
    /// A pace of `fps` frames a second at most, starting now.
    fn new(fps: f64) -> Pace {
        Pace {
            frame_every: Duration::from_secs_f64(1.0 / fps.clamp(0.5, MAX_FPS)),
            started: Instant::now(),
            last_frame: None,
            dirty: true,
            urgent: true,
            shown_second: u64::MAX,
            repaint_until: None,
            meter: CostMeter::new(),
        }
    }

    /// Answers stop signals, a quit or the run's end, a suspend and a continue; Some when the loop ends.
    fn signals(&mut self, terminal: &mut Term, app: &App, opts: &TuiOptions) -> Option<Ending> {
        match crate::sys::stop_signal() {
            0 => {}
            crate::sys::SIGHUP => return Some(Ending::TerminalGone),
            sig => return Some(Ending::Signal(sig)),
        }
        if app.quitting() || opts.duration.is_some_and(|d| self.started.elapsed() >= d) {
            return Some(Ending::Quit);
        }
        if crate::sys::take_suspend() {
            suspend(terminal, opts.mouse);
            self.repaint_until = Some(Instant::now() + REPAINT_AFTER_CONTINUE);
            self.urgent = true;
        }
        if crate::sys::take_continued() {
            // Continued after a stop we did not see coming (SIGSTOP):
            // the shell may have reset the terminal; take it back.
            let _ = terminal::disable_raw_mode();
            if take_terminal(opts.mouse)
                .and_then(|()| terminal.clear())
                .is_err()
            {
                return Some(Ending::TerminalGone);
            }
            self.repaint_until = Some(Instant::now() + REPAINT_AFTER_CONTINUE);
            self.urgent = true;
        }
        None
    }

    /// Draws a frame when one is due; returns when the next is due, or the ending if the terminal is gone.
    fn draw(&mut self, terminal: &mut Term, app: &mut App, look: &Look) -> Result<Instant, Ending> {
        let second = self.started.elapsed().as_secs();
        if second != self.shown_second || self.repaint_until.is_some_and(|u| Instant::now() < u) {
            self.dirty = true;
        }
        let due = self
            .last_frame
            .map_or(Instant::now(), |t| t + self.frame_every);
        if self.urgent || (self.dirty && Instant::now() >= due) {
            let t = Instant::now();
            if self.repaint_until.is_some_and(|u| t < u) && terminal.clear().is_err() {
                return Err(Ending::TerminalGone);
            }
            // What the mouse and the cursor keys lay the screen out on.
            if let Ok(size) = terminal.size() {
                app.view
                    .set_screen(ratatui::layout::Rect::new(0, 0, size.width, size.height));
            }
            if terminal.draw(|f| render::draw(f, app, look)).is_err() {
                return Err(Ending::TerminalGone);
            }
            self.meter.frame(t.elapsed(), app);
            (self.dirty, self.urgent, self.shown_second) = (false, false, second);
            self.last_frame = Some(t);
        }
        Ok(due)
    }

    /// Hands keys and mouse events to the driver (a suspend key suspends here).
    fn input(
        &mut self,
        events: &[Event],
        terminal: &mut Term,
        driver: &mut dyn Driver,
        app: &mut App,
        opts: &TuiOptions,
    ) {
        for ev in events {
            self.urgent = true;
            let k = match ev {
                Event::Key(k) => *k,
                Event::Mouse(m) => {
                    driver.mouse(app, *m);
                    continue;
                }
                _ => continue,
            };
            if let Some(keys::Does::Act(Action::Suspend)) = keys::does(k) {
                suspend(terminal, opts.mouse);
                self.repaint_until = Some(Instant::now() + REPAINT_AFTER_CONTINUE);
                continue;
            }
            driver.key(app, k);
        }
    }
}

/// Ctrl-Z ([`keys::Does::Act(Action::Suspend)`]): gives the terminal back
/// (mouse reporting off, so the shell gets no mouse bytes), stops the
/// process (as a shell job), and on `fg` takes the terminal back (the mouse
/// again if `mouse`) and clears it for a full redraw. The workload keeps
/// its threads but they are stopped with the process.
fn suspend(term: &mut Term, mouse: bool) {
    leave_terminal();
    crate::sys::stop_self();
    let _ = crate::sys::take_continued();
    if take_terminal(mouse).is_ok() {
        let _ = term.clear();
    }
}

/// Does what a key in an overlay (or a click) asked for.
fn overlay_done(app: &mut App, engine: &mut dyn Workload, what: OverlayAction) {
    match what {
        OverlayAction::None => {}
        OverlayAction::Quit => app.quit(),
        OverlayAction::ApplyPreset(name, description, settings) => {
            apply(app, engine, *settings);
            if !matches!(app.overlays.current(), Overlay::Error(_)) {
                engine.mark_event(&format!("preset {name}"));
                app.show.apply_preset(&name, &description);
            }
        }
        OverlayAction::Save(name, _) => save(app, &name),
        OverlayAction::Apply(settings) => apply(app, engine, *settings),
    }
}

/// Applies one key to the app and the engine.
pub fn handle_key(app: &mut App, engine: &mut dyn Workload, key: event::KeyEvent) {
    app.log.end_hint();
    if app.overlays.is_open() {
        let exists = |name: &str| preset::user_path(name).is_ok_and(|p| p.exists());
        let what = overlay::popup_key(app, key, &exists);
        overlay_done(app, engine, what);
        return;
    }
    let action = policy::key_action(&app.running, key);
    if app.quit_key(&action) {
        return;
    }
    if mouse::panel_action(app, &action, true) {
        return;
    }
    if app.timeline_key(&action) {
        return;
    }
    match action {
        Action::None | Action::Suspend | Action::Quit | Action::QuitNow => {}
        Action::CursorUp
        | Action::CursorDown
        | Action::FocusNext
        | Action::FocusPrev
        | Action::OpenChooser
        | Action::OpenPrompt => {}
        Action::Escape => {
            if !app.view.escape() {
                app.flash("Esc closes popups; q quits")
            }
        }
        Action::ToggleHelp => app.overlays.open(Overlay::help_on(app.view.help_topic())),
        Action::TogglePresent => app.view.toggle_present(),
        Action::ZoomIn => app.window.zoom(false),
        Action::ZoomOut => app.window.zoom(true),
        Action::ToggleTimeline => toggle_timeline(app, engine),
        Action::ChooseItem(_) => app.flash("← → choose a work item with the timeline open (t)"),
        Action::ToggleTrace => app.flash("T traces a live run"),
        Action::ResetCharts => {
            app.reset_charts();
            app.flash("charts reset");
        }
        Action::Reconnect => reconnect(app, engine),
        Action::DropCache => match engine.drop_cache() {
            Some(n) => app.flash(format!(
                "page cache dropped ({} MiB): every read misses until it refills",
                (n * 4096) >> 20
            )),
            None => app.flash("no page cache on this read path (direct reads)"),
        },
        Action::MarkBaseline => match app.mark_baseline() {
            Ok(()) => {
                engine.mark_event("baseline");
                app.flash("baseline marked: change a setting and compare");
            }
            Err(why) => app.flash(why.to_string()),
        },
        Action::TogglePause => toggle_pause(app, engine),
        Action::FlipBaseline => match app.baseline.flip(app.running.settings()) {
            Ok(s) => apply(app, engine, s),
            Err(why) => app.flash(why.to_string()),
        },
        Action::ToggleAb => toggle_ab(app, engine),
        Action::Refuse(why) => app.flash(why),
        Action::Apply(s) => apply(app, engine, *s),
        Action::OpenPicker => open_picker(app),
        Action::StartSave => start_save(app),
    }
}

/// `A`: starts the live A/B between the baseline's settings and the
/// current ones, or stops it (back on the current ones), or says why not.
fn toggle_ab(app: &mut App, engine: &mut dyn Workload) {
    if let Some(ab) = stop_ab(app, engine) {
        app.announce(format!(
            "A/B stopped after {}: back on your settings",
            ab::rounds_text(ab.rounds())
        ));
        return;
    }
    begin_ab(app, engine);
}

/// Stops the live A/B ([`finish_ab`]) and goes back to the settings it
/// was started on (`now`'s); None when none ran.
pub(crate) fn stop_ab(app: &mut App, engine: &mut dyn Workload) -> Option<ab::AbRun> {
    let ab = finish_ab(app, engine)?;
    // "now" starts here: at the change back to the current settings,
    // or (on their turn) at a marker of its own.
    let back = ab.sides[1].clone();
    if *app.running.settings() != back {
        apply(app, engine, back);
    } else {
        engine.mark_event(crate::output::report::AB_STOP);
    }
    Some(ab)
}

/// Ends the live A/B, whatever stops it (`A`, another change, a refused
/// switch, a demo's end): its turns stay on the charts and its table on
/// the panel until the next `b` or `A`; its result goes to the recording,
/// the events panel and the summary as one event
/// ([`ab::result_line`]). None when none ran.
pub(crate) fn finish_ab(app: &mut App, engine: &mut dyn Workload) -> Option<ab::AbRun> {
    let ab = app.baseline.end_ab(app.window.elapsed_s())?;
    if let Some(line) = ab::result_line(&ab) {
        engine.mark_event(&line);
    }
    Some(ab)
}

/// Starts the live A/B (the `A` key, a demo step's `ab = true`), marked on
/// the charts, or says why not.
pub(crate) fn begin_ab(app: &mut App, engine: &mut dyn Workload) {
    match app
        .baseline
        .start_ab(app.running.settings(), app.window.elapsed_s())
    {
        Ok(()) => {
            engine.mark_event(crate::output::report::AB_START);
            app.flash(format!(
                "A/B: baseline and now take turns of {:.0} s ({:.1} s settle each); A stops",
                ab::TURN_S,
                ab::SETTLE_S
            ));
        }
        Err(why) => app.flash(why.to_string()),
    }
}

/// The live A/B's clock, each time records come in: when a turn is over,
/// switches to the other side's settings; when the settings were changed
/// by anything else (a key, a preset), stops.
fn ab_tick(app: &mut App, engine: &mut dyn Workload) {
    let t = app.window.elapsed_s();
    let Some(ab) = app.baseline.ab_mut() else {
        return;
    };
    if *app.running.settings() != ab.sides[ab.on] {
        let rounds = ab.rounds();
        finish_ab(app, engine);
        app.announce(format!(
            "A/B stopped after {}: the settings were changed",
            ab::rounds_text(rounds)
        ));
        return;
    }
    if app.view.paused() {
        return;
    }
    let rounds = ab.rounds();
    let Some(next) = ab.due(t, app.window.history().iter()) else {
        return;
    };
    if ab.rounds() > rounds {
        let line = ab::round_line(ab);
        app.log.line(t, line, false);
    }
    // A switch is not a marker or a log line (the round's line says what
    // the turns measured); the panel's clock shows the turns.
    let Some(changes) = apply_quiet(app, engine, next) else {
        finish_ab(app, engine); // the switch was refused: the error says why
        return;
    };
    app.baseline
        .expect_quiet(changes.iter().map(|c| c.label()), app.window.elapsed_s());
    if let Some(ab) = app.baseline.ab_mut() {
        ab.switched(t);
    }
}

/// `R`: reconnects a remote workload, or says why not.
fn reconnect(app: &mut App, engine: &mut dyn Workload) {
    match engine.reconnect() {
        None => {
            app.flash("R reconnects a workload on another machine (--remote); this one runs here")
        }
        Some(Ok(())) => {
            app.running.reconnected(engine.place());
            app.log
                .line(app.window.elapsed_s(), "reconnected".into(), true);
            app.flash("reconnected: the same settings, the charts go on");
        }
        Some(Err(e)) => app.flash(format!("reconnecting failed: {e}")),
    }
}

/// Space: pauses or resumes the workload.
/// `t`: opens the timeline and has the workload trace its spans, or
/// closes it and stops the tracing (it costs nothing while closed).
fn toggle_timeline(app: &mut App, engine: &mut dyn Workload) {
    let open = app.lanes.toggle();
    // A trace file being written keeps the tracing on.
    match engine.trace(open || app.lanes.pinned()) {
        Ok(()) if open => app.flash(format!(
            "timeline: the last {} ms, a lane per CPU; z Z zoom, space freezes, ← → choose, t closes",
            app.lanes.window_ms()
        )),
        Ok(()) => app.flash("timeline closed: tracing stopped"),
        Err(why) if open => {
            app.flash(format!("timeline: {why}"));
            app.lanes.set_note(why);
        }
        Err(_) => {}
    }
}

fn toggle_pause(app: &mut App, engine: &mut dyn Workload) {
    if engine.is_paused() {
        match engine.resume() {
            Ok(()) => app.view.set_paused(false),
            Err(e) => app.overlays.error(e.to_string()),
        }
    } else {
        engine.pause();
        app.view.set_paused(true);
    }
}

/// Opens the preset picker on the shipped and user presets, the current one selected.
fn open_picker(app: &mut App) {
    let items: Vec<PickItem> = preset::list()
        .into_iter()
        .map(|(name, origin, p)| {
            let origin = match origin {
                preset::Origin::Shipped => "shipped",
                _ => "user",
            };
            match p {
                Ok(p) => PickItem {
                    name,
                    origin,
                    description: p.description,
                    settings: Some(p.settings),
                },
                Err(e) => PickItem {
                    name,
                    origin,
                    description: e.to_string(),
                    settings: None,
                },
            }
        })
        .collect();
    let selected = app
        .show
        .preset()
        .and_then(|(n, _)| items.iter().position(|i| &i.name == n))
        .unwrap_or(0);
    app.overlays.open(Overlay::Picker { items, selected });
}

/// Opens the save dialog, the current preset's name selected.
fn start_save(app: &mut App) {
    let name = app.show.preset().map_or(String::new(), |(n, _)| n.clone());
    app.overlays.open(Overlay::SaveName {
        selected: !name.is_empty(),
        name,
        refused: None,
    });
}

/// Runs the engine with `s`; a refusal opens a message and changes nothing.
pub(crate) fn apply(app: &mut App, engine: &mut dyn Workload, s: crate::settings::Settings) {
    let t = Instant::now();
    if let Some(changes) = apply_quiet(app, engine, s) {
        if changes
            .iter()
            .any(|c| c.key == crate::key!(workload.sleep).name())
            && let Some(note) = app.running.take_iowait_note()
        {
            app.log.line(app.window.elapsed_s(), note, true);
        }
        let what: Vec<String> = changes
            .iter()
            .map(|c| crate::output::format::short_label(&c.label()))
            .collect();
        app.flash_logged(if what.is_empty() {
            "no change".to_string()
        } else {
            format!(
                "{} (applied in {:.0} ms)",
                what.join(", "),
                t.elapsed().as_secs_f64() * 1e3
            )
        });
    }
}

/// Applies `s` and takes in the settings running, saying nothing unless
/// it fails (the error overlay says why): the changes made, or None.
fn apply_quiet(
    app: &mut App,
    engine: &mut dyn Workload,
    s: crate::settings::Settings,
) -> Option<Vec<crate::settings::SettingChange>> {
    match engine.apply(s) {
        Ok(changes) => {
            app.running
                .set(engine.settings().clone(), engine.effective().clone());
            app.running.set_pods(engine.pods());
            Some(changes)
        }
        Err(e) => {
            app.overlays.error(e.to_string());
            None
        }
    }
}

/// A saved preset's description: every setting that differs from the
/// defaults (`key = value (default d)`), and the preset it started from.
pub fn saved_description(from: Option<&str>, s: &crate::settings::Settings) -> String {
    let changed: Vec<String> = crate::settings::Settings::default()
        .diff(s)
        .iter()
        .map(|c| format!("{} = {} (default {})", c.key, c.to, c.from))
        .collect();
    let what = if changed.is_empty() {
        "the default settings".to_string()
    } else {
        changed.join("; ")
    };
    match from {
        Some(p) => format!("Saved in the explorer from preset {p}: {what}."),
        None => format!("Saved in the explorer: {what}."),
    }
}

/// Saves the current settings as the user preset `name`, atomically; only
/// ever called after the user typed the name (and said yes to replacing).
fn save(app: &mut App, name: &str) {
    let description = saved_description(
        app.show.preset().map(|p| p.0.as_str()),
        app.running.settings(),
    );
    let p = preset::Preset {
        version: preset::PRESET_VERSION,
        name: name.to_string(),
        description: description.clone(),
        settings: app.running.settings().clone(),
        compare: None,
        published: None,
    };
    match preset::user_path(name).and_then(|path| preset::save_atomic(&p, &path).map(|()| path)) {
        Ok(path) => {
            app.show.name_preset(name, &description);
            app.flash(format!("saved {}", path.display()));
        }
        Err(e) => app.overlays.error(format!("not saved: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::keys::Action;
    use super::saved_description;
    use crate::settings::Settings;

    /// q quits at once without a baseline; with one, the first q only
    /// asks (and says so), any other key cancels, a second q quits;
    /// Ctrl-C never asks.
    #[test]
    fn quitting_asks_once_when_a_baseline_would_be_lost() {
        let mut a = super::fixture::app(false);
        assert!(a.quit_key(&Action::Quit));
        assert!(a.quitting());
        let mut a = super::fixture::app(true);
        assert!(a.baseline.get().is_some());
        assert!(!a.quit_key(&Action::Quit));
        assert_eq!(
            a.flash_text(),
            Some("q again quits; the baseline goes with it")
        );
        assert!(!a.quit_key(&Action::ZoomIn), "another key cancels");
        assert!(!a.quit_key(&Action::Quit), "asks again");
        assert!(!a.quitting());
        assert!(a.quit_key(&Action::Quit), "the second q quits");
        assert!(a.quitting());
        let mut a = super::fixture::app(true);
        assert!(a.quit_key(&Action::QuitNow));
        assert!(!a.quit_key(&Action::Escape));
    }

    /// A record's events: a change is a numbered marker with its line in
    /// the log (changes at one time share one), a caption is shown and
    /// logged but no marker, and the events a live A/B's switch brings
    /// are neither.
    #[test]
    fn a_record_s_events_become_markers_lines_captions_or_nothing() {
        use crate::metrics::Event;
        let mut a = super::fixture::app(true);
        let (markers, lines) = (a.window.markers().len(), a.log.lines().len());
        let n = a.window.markers().last().map_or(0, |m| m.n);
        let t = a.window.elapsed_s();
        a.baseline
            .expect_quiet(["workers.highpri: true -> false".to_string()], t);
        let mut r = super::fixture::record(180);
        let at = |label: &str| Event {
            t_s: r.t_s - 0.1,
            label: label.into(),
        };
        r.events = vec![
            at("workers.mode: bound -> unbound"),
            at("load.hogs: 0 -> 1"),
            at("caption: look here"),
            at("workers.highpri: true -> false"),
        ];
        a.push(r);
        assert_eq!(a.window.markers().len(), markers + 1);
        let m = a.window.markers().last().unwrap();
        assert_eq!(m.n, n + 1);
        assert_eq!(m.label, "mode: bound -> unbound, hogs: 0 -> 1");
        assert_eq!(a.show.caption(), Some("look here"));
        let new: Vec<&str> = a
            .log
            .lines()
            .iter()
            .skip(lines)
            .map(|l| l.1.as_str())
            .collect();
        assert_eq!(
            new,
            [
                format!("[{}] workers.mode: bound -> unbound", n + 1).as_str(),
                format!("[{}] load.hogs: 0 -> 1", n + 1).as_str(),
                "caption: look here",
            ]
        );
    }

    /// A saved preset names every setting that differs from the defaults,
    /// not only the plan (highpri and sleep changes included).
    #[test]
    fn a_saved_preset_describes_every_setting_changed_from_the_default() {
        let mut s = Settings::default();
        assert_eq!(
            saved_description(None, &s),
            "Saved in the explorer: the default settings."
        );
        s.set("workers.mode", "bound").unwrap();
        s.set("workers.highpri", "false").unwrap();
        s.set("workload.sleep", "plain").unwrap();
        let d = saved_description(Some("max-throughput"), &s);
        assert!(
            d.starts_with("Saved in the explorer from preset max-throughput: "),
            "{d}"
        );
        for want in [
            "workers.mode = bound (default ",
            "workers.highpri = false (default true)",
            "workload.sleep = plain (default iowait)",
        ] {
            assert!(d.contains(want), "{want}: {d}");
        }
        assert_eq!(d.matches(" (default ").count(), 3, "{d}");
    }
}
