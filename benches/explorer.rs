//! What the explorer costs per frame and per record, on the fixed fixture
//! (no terminal I/O): `cargo bench --bench explorer`. Prints ms per frame
//! for the 160x48 main screen and the cost of taking in one record with a
//! 10-minute "now" window, incremental (`App::push`) vs merged from scratch
//! (`Window::refresh`). Reports only; nothing is asserted.

use std::time::Instant;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use readpath::tui::fixture::{app, features, record};
use readpath::tui::render::{Look, render};
use readpath::tui::theme::{Theme, ThemeName};

fn main() {
    let look = Look {
        theme: Theme::named(ThemeName::Dark),
        ascii: false,
    };
    let mut a = app(true);
    let mut t = Terminal::new(TestBackend::new(160, 48)).expect("test backend");
    for w in [60.0, 600.0] {
        a.window.zoom_to(w);
        let n = 300;
        let s = Instant::now();
        for _ in 0..n {
            t.draw(|f| render(&a, &look, f.area(), f.buffer_mut()))
                .expect("draw");
        }
        println!(
            "render 160x48, {w:>3.0} s window: {:.3} ms/frame",
            s.elapsed().as_secs_f64() * 1e3 / n as f64
        );
    }
    // 10 minutes of records, no change marker: the "now" window is 2,400 records.
    let s = readpath::settings::Settings::default();
    let mut b = readpath::tui::app::App::new(s.clone(), s, features(), 2);
    b.window.zoom_to(600.0);
    for seq in 0..2400 {
        let mut r = record(seq);
        r.events.clear();
        b.push(r);
    }
    let n = 5;
    let s = Instant::now();
    for _ in 0..n {
        b.window.refresh();
    }
    let full = s.elapsed().as_secs_f64() * 1e3 / n as f64;
    let recs: Vec<_> = (2400..2700).map(record).collect();
    let n = recs.len();
    let s = Instant::now();
    for r in recs {
        b.push(r);
    }
    let slide = s.elapsed().as_secs_f64() * 1e3 / n as f64;
    println!(
        "take in a record, 600 s now-window: push (sliding) {slide:.3} ms, full merge {full:.3} ms"
    );
}
