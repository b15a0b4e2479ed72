//! Writes the app's standing records off the input loop: one thread takes them in order (an
//! accepted revision's quick record, then the full one that replaces it, land in that order)
//! and says in the log what each write did. A write may wait for another process's turn on the
//! standing's lock (docs/standing.md); the screen and the keys go on meanwhile. When the app
//! ends, the writes still queued are finished before it exits, so nothing accepted is lost.

use super::event::{AppEvent, Tx, deliver};
use crate::session::model::LogLevel;
use crate::standing::Update;
use crate::suite::Workspace;
use std::path::PathBuf;
use std::sync::mpsc;

/// One record to write.
struct Job {
    ws: PathBuf,
    suite: String,
    hardware: String,
    update: Update,
}

/// The writer thread and its queue (started on the first record).
#[derive(Default)]
pub struct StandingWriter {
    queue: Option<mpsc::Sender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StandingWriter {
    /// Queues a record; its outcome reaches the log through `tx`.
    pub fn record(&mut self, tx: &Tx, ws: PathBuf, suite: &str, hardware: &str, update: Update) {
        let job = Job {
            ws,
            suite: suite.to_string(),
            hardware: hardware.to_string(),
            update,
        };
        let queue = self.queue.get_or_insert_with(|| {
            let (q, jobs) = mpsc::channel::<Job>();
            let tx = tx.clone();
            self.thread = Some(std::thread::spawn(move || {
                for j in jobs {
                    for (level, line) in write(&j) {
                        deliver(&tx, AppEvent::Log(level, line));
                    }
                }
            }));
            q
        });
        if let Err(mpsc::SendError(job)) = queue.send(job) {
            // The thread is gone (it cannot panic short of a bug): write here rather than lose it.
            for (level, line) in write(&job) {
                deliver(tx, AppEvent::Log(level, line));
            }
        }
    }

    /// Finishes the queued writes (at the app's end).
    pub fn finish(&mut self) {
        self.queue = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for StandingWriter {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Writes one record (its kernel, then the file, atomically) and says what happened.
fn write(j: &Job) -> Vec<(LogLevel, String)> {
    let ws = Workspace {
        dir: j.ws.clone(),
        reason: "the app's workspace",
    };
    let u = &j.update;
    match crate::standing::store::record(&ws, &j.suite, &j.hardware, std::slice::from_ref(u)) {
        Ok(w) => {
            let mut out = Vec::new();
            if let Some((to, why)) = w.backup {
                out.push((
                    LogLevel::Warn,
                    format!("standing: {why}; moved to {}", to.display()),
                ));
            }
            out.push((
                LogLevel::Good,
                format!(
                    "standing: {} recorded (S_op {:.3}) in {}",
                    u.op,
                    u.record.measurement.s_op,
                    w.file.display()
                ),
            ));
            out
        }
        Err(e) => vec![(
            LogLevel::Error,
            format!("standing: {} not recorded: {e}", u.op),
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::{AppEvent, StandingWriter, Update};

    /// Records queued one after the other land in that order, and the log hears of each; the
    /// app's end waits for what is still queued.
    #[test]
    fn records_land_in_order_and_are_finished_at_the_end() {
        let d = crate::testing::tempdir("standing-writer");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut w = StandingWriter::default();
        // The shipped record of rms_norm (its kernel a template: only the file is written).
        let shipped = crate::standing::shipped::load("atrex-bench")
            .unwrap()
            .unwrap();
        let base = Update {
            op: "rms_norm".into(),
            record: shipped.operators["rms_norm"].clone(),
            source: String::new(),
        };
        for s_op in [0.1, 0.2, 0.3] {
            let mut u = base.clone();
            u.record.measurement.s_op = s_op;
            w.record(&tx, d.clone(), "atrex-bench", "H200", u);
        }
        w.finish();
        let mut lines = Vec::new();
        while let Ok(AppEvent::Log(_, l)) = rx.try_recv() {
            lines.push(l);
        }
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[2].contains("recorded (S_op 0.300)"), "{lines:?}");
        let text = std::fs::read_to_string(d.join("standing/H200.json")).unwrap();
        let f: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(f["operators"]["rms_norm"]["measurement"]["s_op"], 0.3);
        std::fs::remove_dir_all(&d).ok();
    }
}
