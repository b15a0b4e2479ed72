//! Worker launch templates (`LaunchTemplate`, the `command` of a `[[workers]]` entry): a command
//! line that starts a worker speaking the protocol on its standard streams (`ssh -T gpu-box-2
//! atrex-tui worker --device {device}`), split into words as a POSIX shell would (the `shlex`
//! crate) and run directly, without a shell in between.
//!
//! Placeholders: `{device}` becomes the device index, `{exe}` this program's path. A word that
//! is exactly `{exe}` gets the path as it is; inside a longer word (a string handed to a remote
//! shell, `sh -c 'exec {exe} worker …'`) the path is shell-quoted when it needs to be. Any other
//! `{name}` is an error, so that a typo cannot reach a remote machine as a literal.

use std::path::Path;

/// A parsed launch template.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchTemplate {
    /// The command line as written.
    pub line: String,
    words: Vec<String>,
}

/// Why a command line is not a usable template.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LaunchTemplateError {
    #[error("the command is empty")]
    Empty,
    #[error("unbalanced quotes or a trailing backslash in `{0}`")]
    Quotes(String),
    #[error("unknown placeholder `{{{name}}}` in `{line}` (placeholders: {{device}}, {{exe}})")]
    Placeholder { name: String, line: String },
}

const PLACEHOLDERS: [&str; 2] = ["device", "exe"];

impl LaunchTemplate {
    pub fn parse(line: &str) -> Result<LaunchTemplate, LaunchTemplateError> {
        let words =
            shlex::split(line).ok_or_else(|| LaunchTemplateError::Quotes(line.to_string()))?;
        if words.is_empty() {
            return Err(LaunchTemplateError::Empty);
        }
        for w in &words {
            let mut rest = w.as_str();
            while let Some(open) = rest.find('{') {
                let after = &rest[open + 1..];
                let Some(close) = after.find('}') else { break };
                let name = &after[..close];
                let looks_like_one =
                    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if looks_like_one && !PLACEHOLDERS.contains(&name) {
                    return Err(LaunchTemplateError::Placeholder {
                        name: name.to_string(),
                        line: line.to_string(),
                    });
                }
                rest = &after[close + 1..];
            }
        }
        Ok(LaunchTemplate {
            line: line.to_string(),
            words,
        })
    }

    /// Whether the template names the device (without `{device}` every worker of the entry
    /// runs the same command, as with `srun`, where each allocation sees its GPU as 0).
    pub fn names_device(&self) -> bool {
        self.words.iter().any(|w| w.contains("{device}"))
    }

    /// The program and its arguments for one device.
    pub fn argv(&self, device: u32, exe: &Path) -> Vec<String> {
        let raw = exe.to_string_lossy();
        let quoted = shlex::try_quote(&raw)
            .map(|q| q.into_owned())
            .unwrap_or_else(|_| raw.to_string());
        self.words
            .iter()
            .map(|w| {
                let w = w.replace("{device}", &device.to_string());
                if w == "{exe}" {
                    raw.to_string()
                } else {
                    w.replace("{exe}", &quoted)
                }
            })
            .collect()
    }

    /// The command line for one device, as shown to the user (words quoted where needed).
    pub fn display(&self, device: u32, exe: &Path) -> String {
        let argv = self.argv(device, exe);
        shlex::try_join(argv.iter().map(|s| s.as_str())).unwrap_or_else(|_| argv.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_like_a_shell_and_placeholders_are_substituted() {
        let t =
            LaunchTemplate::parse("ssh -T gpu-box-2 atrex-tui worker --device {device}").unwrap();
        assert!(t.names_device());
        assert_eq!(
            t.argv(3, Path::new("/x/atrex-tui")),
            vec![
                "ssh",
                "-T",
                "gpu-box-2",
                "atrex-tui",
                "worker",
                "--device",
                "3"
            ]
        );
        let t = LaunchTemplate::parse("sh -c 'exec {exe} worker --device {device}'").unwrap();
        assert_eq!(
            t.argv(1, Path::new("/opt/my tools/atrex-tui")),
            vec![
                "sh",
                "-c",
                "exec '/opt/my tools/atrex-tui' worker --device 1"
            ]
        );
        let t = LaunchTemplate::parse("{exe} worker --device {device}").unwrap();
        assert_eq!(
            t.argv(0, Path::new("/opt/my tools/atrex-tui"))[0],
            "/opt/my tools/atrex-tui",
            "a word of its own is the path as it is"
        );
        assert_eq!(
            t.display(0, Path::new("/opt/my tools/atrex-tui")),
            "'/opt/my tools/atrex-tui' worker --device 0"
        );
        let t = LaunchTemplate::parse("srun --gres=gpu:1 --ntasks=1 atrex-tui worker --device 0")
            .unwrap();
        assert!(!t.names_device());
    }

    #[test]
    fn bad_templates_say_why() {
        assert_eq!(LaunchTemplate::parse("  "), Err(LaunchTemplateError::Empty));
        assert!(matches!(
            LaunchTemplate::parse("ssh 'box atrex-tui worker"),
            Err(LaunchTemplateError::Quotes(_))
        ));
        let e = LaunchTemplate::parse("ssh box atrex-tui worker --device {dev}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown placeholder `{dev}`"), "{e}");
        // Braces that are not a placeholder (shell or awk code) pass.
        assert!(LaunchTemplate::parse("sh -c 'f() { exec atrex-tui worker; }; f'").is_ok());
    }
}
