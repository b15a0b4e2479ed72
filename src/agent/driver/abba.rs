//! A B B A timing of incumbent and candidate, the evidence the auto rule accepts on.

use super::*;

impl<P: Proposer, M: Measurer, G: Gate, S: Sink> Driver<P, M, G, S> {
    /// A B B A timing of incumbent (A) and candidate (B), all four runs on one worker (held
    /// from the measurer's pool for them): a gain measured across two GPUs would be the GPUs'.
    pub async fn abba(&mut self, a: &str, b: &str, timing_noise: f64) -> Abba {
        let mut runs = [0.0; 4];
        let mut noise = timing_noise;
        let mut refused = None;
        match self.measurer.hold().await {
            Err(e) => {
                refused = Some(format!("no worker could be held for the A B B A runs: {e}"));
            }
            Ok(_) => {
                for (i, src) in [a, b, b, a].iter().enumerate() {
                    let o = self.measurer.run(src, JobKind::Time, Mode::Full).await;
                    runs[i] = timed_s_op(&o.shapes);
                    noise = noise.max(super::summary::timing_noise(&o.shapes));
                    // A timed run that the harness caught (outputs differ from the check,
                    // inputs modified, faults) proves nothing: the comparison is refused.
                    if let Some(r) = o
                        .shapes
                        .iter()
                        .find(|r| !matches!(r.verdict, Verdict::Pass | Verdict::Unchecked))
                    {
                        runs[i] = 0.0;
                        refused.get_or_insert(format!(
                            "{} run {}: shape {} {}: {}",
                            if i == 1 || i == 2 {
                                "candidate"
                            } else {
                                "incumbent"
                            },
                            "ABBA".chars().nth(i).unwrap_or('?'),
                            r.shape,
                            r.verdict.name(),
                            r.message.clone().unwrap_or_default()
                        ));
                    }
                }
                self.measurer.release();
            }
        }
        let mut a = Abba::from_runs(runs, noise);
        a.refused = refused;
        a
    }
}
