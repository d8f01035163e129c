//! A progress line on stderr for long passes: redrawn in place on a
//! terminal, a line every few seconds otherwise (logs, CI), silent when off.

use std::io::{IsTerminal as _, Write as _};
use std::time::{Duration, Instant};

/// Progress of one pass over a known (or estimated) number of items.
pub(crate) struct Progress {
    label: &'static str,
    total: u64,
    done: u64,
    enabled: bool,
    terminal: bool,
    started: Instant,
    drawn: Option<Instant>,
}

impl Progress {
    /// A pass over about `total` items; draws nothing unless `enabled`.
    pub(crate) fn new(label: &'static str, total: u64, enabled: bool) -> Self {
        Self {
            label,
            total,
            done: 0,
            enabled,
            terminal: std::io::stderr().is_terminal(),
            started: Instant::now(),
            drawn: None,
        }
    }

    /// Counts `n` more items done.
    pub(crate) fn advance(&mut self, n: u64) {
        self.done += n;
        let every = if self.terminal {
            Duration::from_millis(200)
        } else {
            Duration::from_secs(5)
        };
        if self.enabled && self.drawn.is_none_or(|at| at.elapsed() >= every) {
            self.draw(false);
        }
    }

    /// Draws the final line.
    pub(crate) fn finish(mut self) {
        if self.enabled {
            self.draw(true);
        }
    }

    fn draw(&mut self, last: bool) {
        self.drawn = Some(Instant::now());
        let total = self.total.max(self.done);
        let percent = (self.done * 100).checked_div(total).unwrap_or(100);
        let width = 30usize;
        let filled = usize::try_from(percent).unwrap_or(100) * width / 100;
        let line = format!(
            "{:<12} [{}{}] {:>3}% {}/{} ({:.1} s)",
            self.label,
            "#".repeat(filled),
            "-".repeat(width - filled),
            percent,
            self.done,
            total,
            self.started.elapsed().as_secs_f64()
        );
        let mut err = std::io::stderr().lock();
        let _ = if self.terminal {
            write!(err, "\r{line}{}", if last { "\n" } else { "" })
        } else {
            writeln!(err, "{line}")
        };
    }
}
