//! Colours of the explorer. Two themes (dark and light terminals) plus a
//! high-contrast variant for projectors; every widget takes its colours from
//! here so a theme is one table, not a search through the render code.

use ratatui::style::{Color, Modifier, Style};

/// Which palette.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ThemeName {
    /// Light text on a dark terminal.
    Dark,
    /// Dark text on a light terminal.
    Light,
}

/// Every colour the screen uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Theme {
    /// Ordinary text.
    pub text: Color,
    /// Secondary text: labels, axes, units.
    pub dim: Color,
    /// Panel borders.
    pub border: Color,
    /// Panel titles and keys.
    pub title: Color,
    /// A setting the machine does not allow.
    pub disabled: Color,
    /// Good news: a feature present, an improvement.
    pub good: Color,
    /// Bad news: a feature missing, a regression, a failure.
    pub bad: Color,
    /// Warnings and notices.
    pub warn: Color,
    /// Change markers on the charts.
    pub marker: Color,
    /// The baseline overlay.
    pub baseline: Color,
    /// Series colours, in order (p50, p99, p99.9 / MiB/s, IOPS / ...).
    pub series: [Color; 4],
    /// Busy bars.
    pub busy: Color,
    /// Iowait bars.
    pub iowait: Color,
}

impl Theme {
    /// The palette of a theme.
    pub fn named(name: ThemeName) -> Theme {
        match name {
            ThemeName::Dark => Theme {
                text: Color::Gray,
                dim: Color::DarkGray,
                border: Color::DarkGray,
                title: Color::Cyan,
                disabled: Color::DarkGray,
                good: Color::Green,
                bad: Color::LightRed,
                warn: Color::Yellow,
                marker: Color::Magenta,
                baseline: Color::LightBlue,
                series: [Color::Green, Color::Yellow, Color::LightRed, Color::Cyan],
                busy: Color::Green,
                iowait: Color::Yellow,
            },
            ThemeName::Light => Theme {
                text: Color::Black,
                dim: Color::DarkGray,
                border: Color::Gray,
                title: Color::Blue,
                disabled: Color::Gray,
                good: Color::Green,
                bad: Color::Red,
                warn: Color::Rgb(160, 100, 0),
                marker: Color::Magenta,
                baseline: Color::Blue,
                series: [
                    Color::Green,
                    Color::Rgb(170, 120, 0),
                    Color::Red,
                    Color::Blue,
                ],
                busy: Color::Green,
                iowait: Color::Rgb(170, 120, 0),
            },
        }
    }

    /// Plain text.
    pub fn text(&self) -> Style {
        Style::default().fg(self.text)
    }

    /// Secondary text.
    pub fn dim(&self) -> Style {
        Style::default().fg(self.dim)
    }

    /// Titles and key names.
    pub fn title(&self) -> Style {
        Style::default().fg(self.title).add_modifier(Modifier::BOLD)
    }

    /// Borders.
    pub fn border(&self) -> Style {
        Style::default().fg(self.border)
    }
}
