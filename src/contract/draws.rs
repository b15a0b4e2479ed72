//! Which input draws a check runs: the job's random seeds, then its structured draws
//! (docs/problem-format.md, "Structured draws"; docs/worker-protocol.md).
//!
//! Invariants: the random seeds always come first and all of them run; in full mode every
//! structured draw runs, in quick mode exactly one, chosen by the job's first seed (so it
//! varies from job to job and is recorded by the seed); a structured draw is deterministic in
//! (seed, draw): its seed is one of the job's seeds, and its structure pass is keyed by a hash of
//! the draw's name.

use super::protocol::{Draw, Job, Mode};
use crate::suite::Problem;

/// One input case of a check.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Case<'a> {
    /// The seed of the random generation.
    pub seed: u64,
    /// The structure pass applied after it (None: a random draw).
    pub draw: Option<&'a Draw>,
}

impl Case<'_> {
    /// "(seed N)" or "on the structured draw `name` (seed N)", for messages.
    pub fn label(&self) -> String {
        match self.draw {
            None => format!("(seed {})", self.seed),
            Some(d) => format!("on the structured draw `{}` (seed {})", d.name, self.seed),
        }
    }
}

/// The problem's declared draws, for a job.
pub fn of_problem(p: &Problem) -> Vec<Draw> {
    p.draws
        .iter()
        .map(|d| Draw {
            name: d.name.clone(),
            pass: d.pass.clone(),
            inputs: d.inputs.clone(),
        })
        .collect()
}

/// The structured draws a check runs: all in full mode, one in quick mode (picked by the first
/// seed), none without seeds.
pub fn selected(job: &Job) -> Vec<&Draw> {
    let Some(first) = job.seeds.first() else {
        return Vec::new();
    };
    match job.mode {
        Mode::Full => job.draws.iter().collect(),
        Mode::Quick => job
            .draws
            .get((first % job.draws.len().max(1) as u64) as usize)
            .into_iter()
            .collect(),
    }
}

/// Every case of a check, in order: the random seeds, then the selected structured draws (the
/// i-th on the job's seed i mod the number of seeds).
pub fn cases(job: &Job) -> Vec<Case<'_>> {
    let mut out: Vec<Case> = job
        .seeds
        .iter()
        .map(|s| Case {
            seed: *s,
            draw: None,
        })
        .collect();
    for (i, d) in selected(job).into_iter().enumerate() {
        out.push(Case {
            seed: job.seeds[i % job.seeds.len()],
            draw: Some(d),
        });
    }
    out
}

/// The key of a draw's structure pass: FNV-1a of its name.
pub fn salt(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::protocol::JobKind;
    use crate::suite::{Suite, SuiteSource};

    fn job(mode: Mode, seeds: Vec<u64>) -> Job {
        let suite = Suite::load(SuiteSource::Embedded).unwrap();
        let p = suite.problem("rms_norm").unwrap();
        let code = crate::contract::protocol::Source {
            name: "k".into(),
            code: String::new(),
            defines: Default::default(),
        };
        let mut j =
            crate::contract::job::build_job(p, code, None, &[0], JobKind::Check, mode, None)
                .unwrap();
        j.seeds = seeds;
        j
    }

    #[test]
    fn the_job_carries_the_problems_draws_except_for_dumps() {
        let suite = Suite::load(SuiteSource::Embedded).unwrap();
        let p = suite.problem("rms_norm").unwrap();
        let j = job(Mode::Full, vec![1]);
        assert!(j.draws.len() >= 4, "{:?}", j.draws);
        assert_eq!(j.draws, of_problem(p));
        let names: Vec<&str> = j.draws.iter().map(|d| d.name.as_str()).collect();
        for n in ["zero_rows", "large", "tiny", "outliers"] {
            assert!(names.contains(&n), "{names:?}");
        }
        let code = j.candidate.clone();
        let d =
            crate::contract::job::build_job(p, code, None, &[0], JobKind::Dump, Mode::Quick, None)
                .unwrap();
        assert!(d.draws.is_empty());
        // Old jobs without the field still parse.
        let mut v = serde_json::to_value(&j).unwrap();
        v.as_object_mut().unwrap().remove("draws");
        let back: Job = serde_json::from_value(v).unwrap();
        assert!(back.draws.is_empty());
    }

    #[test]
    fn full_checks_every_draw_after_every_seed() {
        let j = job(Mode::Full, vec![10, 11, 12, 13, 14]);
        let c = cases(&j);
        assert_eq!(c.len(), 5 + j.draws.len());
        assert!(c[..5].iter().all(|c| c.draw.is_none()));
        let names: Vec<&str> = c[5..]
            .iter()
            .map(|c| c.draw.unwrap().name.as_str())
            .collect();
        let all: Vec<&str> = j.draws.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, all);
        for (i, x) in c[5..].iter().enumerate() {
            assert_eq!(x.seed, j.seeds[i % 5], "draw {i} on seed {i} mod 5");
        }
        let mut few = job(Mode::Full, vec![10, 11]);
        few.draws.truncate(3);
        let seeds: Vec<u64> = cases(&few)[2..].iter().map(|c| c.seed).collect();
        assert_eq!(seeds, vec![10, 11, 10], "seeds reused in turn");
    }

    #[test]
    fn quick_checks_one_draw_chosen_by_the_seed() {
        let n = job(Mode::Quick, vec![0]).draws.len() as u64;
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..3 * n {
            let j = job(Mode::Quick, vec![seed]);
            let c = cases(&j);
            assert_eq!(c.len(), 2, "one random seed and one structured draw");
            assert_eq!(c[0].draw, None);
            let d = c[1].draw.unwrap();
            assert_eq!(d, &j.draws[(seed % n) as usize]);
            assert_eq!(c[1].seed, seed);
            seen.insert(d.name.clone());
        }
        assert_eq!(seen.len() as u64, n, "every draw gets its turn");
        let mut j = job(Mode::Quick, vec![]);
        assert!(cases(&j).is_empty());
        j.seeds = vec![3];
        j.draws.clear();
        assert_eq!(cases(&j).len(), 1);
    }

    #[test]
    fn labels_name_the_draw() {
        let d = Draw {
            name: "zero_rows".into(),
            pass: "zero_rows".into(),
            inputs: vec!["x".into()],
        };
        let c = Case {
            seed: 7,
            draw: Some(&d),
        };
        assert_eq!(c.label(), "on the structured draw `zero_rows` (seed 7)");
        assert_eq!(
            Case {
                seed: 7,
                draw: None
            }
            .label(),
            "(seed 7)"
        );
        assert_ne!(salt("zero_rows"), salt("const_rows"));
    }
}
