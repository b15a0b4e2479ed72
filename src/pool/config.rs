//! Which workers a command uses: `[[workers]]` tables in the settings file, or a workers file of
//! the same tables given with `--workers FILE` (docs/cluster.md), else one local worker per GPU.
//!
//! ```toml
//! [[workers]]
//! command = "ssh -T gpu-box-2 atrex-tui worker --device {device}"
//! devices = [0, 1]        # one worker per device (default [0])
//! count = 1               # workers per device (default 1; srun allocations: several on "0")
//! group = "h200"          # optional: workers of one GPU model, when the pool mixes models
//! label = "box2"          # optional: names the workers instead of host:device
//! hello_timeout_secs = 30 # optional: how long a start may take (srun waits for an allocation)
//! ```
//!
//! Every error names the file and the line of the entry.

use super::launch_command::LaunchTemplate;
use crate::error::ConfigError;
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;

/// The default time a worker has to answer `hello` at start (it creates its CUDA context).
pub const HELLO_TIMEOUT_SECS: f64 = 30.0;

/// One `[[workers]]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerEntry {
    pub command: LaunchTemplate,
    pub devices: Vec<u32>,
    pub count: u32,
    pub group: String,
    pub label: Option<String>,
    pub hello_timeout_secs: f64,
    /// Where the table starts in its file.
    pub line: usize,
}

/// One worker of a pool.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerSpec {
    /// None: this program (`worker --device N`) on this machine.
    pub launch: Option<LaunchTemplate>,
    pub device: u32,
    pub group: String,
    /// The name results give it, when set (else `host:device` from its hello).
    pub label: Option<String>,
    pub hello_timeout: Duration,
}

impl WorkerSpec {
    /// The local worker of one GPU.
    pub fn local(device: u32) -> WorkerSpec {
        WorkerSpec {
            launch: None,
            device,
            group: String::new(),
            label: None,
            hello_timeout: Duration::from_secs_f64(HELLO_TIMEOUT_SECS),
        }
    }

    /// The command line that starts it.
    pub fn command_line(&self, exe: &Path) -> String {
        match &self.launch {
            Some(t) => t.display(self.device, exe),
            None => {
                let argv = [
                    exe.to_string_lossy().to_string(),
                    "worker".into(),
                    "--device".into(),
                    self.device.to_string(),
                ];
                shlex::try_join(argv.iter().map(|s| s.as_str())).unwrap_or_else(|_| argv.join(" "))
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    command: toml::Spanned<String>,
    #[serde(default)]
    devices: Option<toml::Spanned<Vec<u32>>>,
    #[serde(default)]
    count: Option<toml::Spanned<u32>>,
    #[serde(default)]
    group: Option<String>,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    hello_timeout_secs: Option<toml::Spanned<f64>>,
}

/// The settings file: only `[[workers]]` is read here.
#[derive(Deserialize, Default)]
struct InSettings {
    #[serde(default)]
    workers: Vec<toml::Spanned<RawEntry>>,
}

/// A workers file: nothing but `[[workers]]`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct WorkersFile {
    #[serde(default)]
    workers: Vec<toml::Spanned<RawEntry>>,
}

const TABLE: &str = "[[workers]]: ";

fn at(file: &str, text: &str, pos: usize, message: String) -> ConfigError {
    ConfigError::Parse {
        file: file.to_string(),
        line: Some(crate::suite::line_of(text, pos)),
        table: TABLE,
        message,
    }
}

fn parse_error(file: &str, text: &str, e: &toml::de::Error) -> ConfigError {
    ConfigError::Parse {
        file: file.to_string(),
        line: e.span().map(|s| crate::suite::line_of(text, s.start)),
        table: TABLE,
        message: e.message().to_string(),
    }
}

fn entries(
    file: &str,
    text: &str,
    raw: Vec<toml::Spanned<RawEntry>>,
) -> Result<Vec<WorkerEntry>, ConfigError> {
    let mut out = Vec::new();
    for r in raw {
        let start = r.span().start;
        let r = r.into_inner();
        let command = LaunchTemplate::parse(r.command.get_ref())
            .map_err(|e| at(file, text, r.command.span().start, format!("command: {e}")))?;
        let devices = match r.devices {
            None => vec![0],
            Some(d) if d.get_ref().is_empty() => {
                return Err(at(
                    file,
                    text,
                    d.span().start,
                    "devices: the list is empty (one worker per device: e.g. [0, 1])".into(),
                ));
            }
            Some(d) => d.into_inner(),
        };
        let count = match r.count {
            None => 1,
            Some(c) if *c.get_ref() == 0 => {
                return Err(at(
                    file,
                    text,
                    c.span().start,
                    "count must be at least 1".into(),
                ));
            }
            Some(c) => c.into_inner(),
        };
        let hello_timeout_secs = match r.hello_timeout_secs {
            None => HELLO_TIMEOUT_SECS,
            Some(t) if !(*t.get_ref() > 0.0 && t.get_ref().is_finite()) => {
                return Err(at(
                    file,
                    text,
                    t.span().start,
                    "hello_timeout_secs must be a positive number of seconds".into(),
                ));
            }
            Some(t) => t.into_inner(),
        };
        out.push(WorkerEntry {
            command,
            devices,
            count,
            group: r.group.unwrap_or_default(),
            label: r.label.filter(|l| !l.trim().is_empty()),
            hello_timeout_secs,
            line: crate::suite::line_of(text, start),
        });
    }
    Ok(out)
}

/// The `[[workers]]` tables of a settings file's text.
pub fn parse_settings(file: &str, text: &str) -> Result<Vec<WorkerEntry>, ConfigError> {
    let doc: InSettings = toml::from_str(text).map_err(|e| parse_error(file, text, &e))?;
    entries(file, text, doc.workers)
}

/// A workers file (`--workers FILE`): `[[workers]]` tables and nothing else, at least one.
pub fn parse_file(file: &str, text: &str) -> Result<Vec<WorkerEntry>, ConfigError> {
    let doc: WorkersFile = toml::from_str(text).map_err(|e| parse_error(file, text, &e))?;
    let e = entries(file, text, doc.workers)?;
    if e.is_empty() {
        return Err(ConfigError::Invalid {
            file: file.into(),
            message:
                "no [[workers]] table: a workers file lists at least one worker (docs/cluster.md)"
                    .into(),
        });
    }
    Ok(e)
}

/// Reads a workers file.
pub fn load_file(path: &Path) -> Result<Vec<WorkerEntry>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        file: path.to_path_buf(),
        source,
    })?;
    parse_file(&path.display().to_string(), &text)
}

/// The workers of some entries: one per device and count, in the order written.
pub fn specs(entries: &[WorkerEntry]) -> Vec<WorkerSpec> {
    let mut out = Vec::new();
    for e in entries {
        let several = e.devices.len() * e.count as usize > 1;
        for d in &e.devices {
            for k in 0..e.count {
                let label = e.label.as_ref().map(|l| {
                    let mut n = if several {
                        format!("{l}:{d}")
                    } else {
                        l.clone()
                    };
                    if e.count > 1 {
                        n.push_str(&format!("#{}", k + 1));
                    }
                    n
                });
                out.push(WorkerSpec {
                    launch: Some(e.command.clone()),
                    device: *d,
                    group: e.group.clone(),
                    label,
                    hello_timeout: Duration::from_secs_f64(e.hello_timeout_secs),
                });
            }
        }
    }
    out
}

/// Where a command's workers come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    /// `--device N`: this machine's GPU N only.
    Device(u32),
    /// `--workers FILE` or the settings' `[[workers]]`: these.
    Listed {
        from: String,
        specs: Vec<WorkerSpec>,
    },
    /// One local worker per GPU (found by asking the worker of GPU 0).
    Local,
}

/// The workers of a command: `--device`, else `--workers FILE`, else the settings' tables
/// (`entries`, read from `settings_file`), else one per local GPU.
pub fn choose(
    device: Option<u32>,
    file: Option<&Path>,
    entries: &[WorkerEntry],
    settings_file: Option<&Path>,
) -> Result<Choice, ConfigError> {
    if let Some(d) = device {
        return Ok(Choice::Device(d));
    }
    if let Some(f) = file {
        return Ok(Choice::Listed {
            from: f.display().to_string(),
            specs: specs(&load_file(f)?),
        });
    }
    if !entries.is_empty() {
        return Ok(Choice::Listed {
            from: settings_file
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "the settings".into()),
            specs: specs(entries),
        });
    }
    Ok(Choice::Local)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expand_to_one_worker_per_device_and_count() {
        let text = r#"
[[workers]]
command = "ssh -T gpu-box-2 atrex-tui worker --device {device}"
devices = [0, 1]
group = "h200"

[[workers]]
command = "srun --gres=gpu:1 --ntasks=1 atrex-tui worker --device 0"
count = 2
label = "slurm"
hello_timeout_secs = 600
"#;
        let e = parse_file("w.toml", text).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!((e[0].line, e[1].line), (2, 7));
        let s = specs(&e);
        assert_eq!(s.len(), 4);
        assert_eq!((s[0].device, s[1].device), (0, 1));
        assert_eq!(s[1].group, "h200");
        assert_eq!(s[0].label, None);
        assert_eq!(
            (s[2].label.as_deref(), s[3].label.as_deref()),
            (Some("slurm:0#1"), Some("slurm:0#2"))
        );
        assert_eq!(s[3].hello_timeout, Duration::from_secs(600));
        assert_eq!(
            s[1].command_line(Path::new("/x")),
            "ssh -T gpu-box-2 atrex-tui worker --device 1"
        );
    }

    #[test]
    fn mistakes_name_the_file_and_line() {
        for (text, want) in [
            (
                "[[workers]]\ncommand = \"ssh 'box atrex-tui worker\"\n",
                "w.toml:2: [[workers]]: command: unbalanced quotes",
            ),
            (
                "[[workers]]\ncommand = \"ssh box atrex-tui worker --device {dev}\"\n",
                "w.toml:2: [[workers]]: command: unknown placeholder `{dev}`",
            ),
            (
                "[[workers]]\ncommand = \"x\"\ndevices = []\n",
                "w.toml:3: [[workers]]: devices: the list is empty",
            ),
            (
                "[[workers]]\ncommand = \"x\"\n\ncount = 0\n",
                "w.toml:4: [[workers]]: count must be at least 1",
            ),
            (
                "[[workers]]\ncommand = \"x\"\nhost = \"y\"\n",
                "w.toml:3: [[workers]]: unknown field `host`",
            ),
            (
                "[[workers]]\ndevices = [0]\n",
                "w.toml:1: [[workers]]: missing field `command`",
            ),
            (
                "theme = \"dark\"\n",
                "w.toml:1: [[workers]]: unknown field `theme`",
            ),
        ] {
            let e = parse_file("w.toml", text).unwrap_err().to_string();
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
        let e = parse_file("w.toml", "").unwrap_err().to_string();
        assert!(e.contains("no [[workers]] table"), "{e}");
    }
}
