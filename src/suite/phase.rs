//! Operator phases (prefill, decode) and the phase filter over them.

/// Operator phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Prefill,
    Decode,
}

/// A phase filter: all operators, or those active in one phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PhaseFilter {
    #[default]
    All,
    Prefill,
    Decode,
}

impl PhaseFilter {
    pub fn admits(self, phases: &[Phase]) -> bool {
        match self {
            PhaseFilter::All => true,
            PhaseFilter::Prefill => phases.contains(&Phase::Prefill),
            PhaseFilter::Decode => phases.contains(&Phase::Decode),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            PhaseFilter::All => "all",
            PhaseFilter::Prefill => "prefill",
            PhaseFilter::Decode => "decode",
        }
    }
    pub fn next(self) -> Self {
        match self {
            PhaseFilter::All => PhaseFilter::Prefill,
            PhaseFilter::Prefill => PhaseFilter::Decode,
            PhaseFilter::Decode => PhaseFilter::All,
        }
    }
}
