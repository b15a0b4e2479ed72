//! The handshake every worker start begins with: the client sends `hello`, the worker answers
//! with its protocol version, its atrex-tui version, its host and device. Client and worker must
//! agree on both versions (a job carries every source, but the harness, the checks and the
//! timing rules are the binary's own: two versions could measure differently), so a mismatch is
//! refused before any job, naming the worker and both versions.

use crate::contract::protocol::{DeviceInfo, Event, PROTOCOL_VERSION, ProbeInfo, TOOL_VERSION};

/// Who a worker is, from its `hello`.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    pub host: Option<String>,
    pub device: Option<DeviceInfo>,
    pub probe: ProbeInfo,
    pub protocol: u32,
    pub tool_version: String,
}

impl Identity {
    /// `host:device` (the index the worker serves), as results name the worker.
    pub fn name(&self, device: u32) -> String {
        format!("{}:{device}", self.host.as_deref().unwrap_or("?"))
    }

    /// The GPU model, when the worker has one.
    pub fn gpu(&self) -> Option<&str> {
        self.device.as_ref().map(|d| d.name.as_str())
    }
}

/// A worker that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HandshakeError {
    #[error(
        "worker {worker} runs atrex-tui {theirs_tool} (protocol {theirs}); this is atrex-tui {ours_tool} (protocol {ours}): install the same atrex-tui version on both sides"
    )]
    Mismatch {
        worker: String,
        theirs: u32,
        theirs_tool: String,
        ours: u32,
        ours_tool: String,
    },
    #[error("worker {worker} answered hello with something else: {what}")]
    NotHello { worker: String, what: String },
}

/// Checks a worker's answer to `hello` against this build.
pub fn check(worker: &str, ev: &Event) -> Result<Identity, HandshakeError> {
    let Event::Hello {
        protocol,
        tool_version,
        host,
        probe,
        device,
        ..
    } = ev
    else {
        let mut what = format!("{ev:?}");
        what.truncate(160);
        return Err(HandshakeError::NotHello {
            worker: worker.to_string(),
            what,
        });
    };
    let theirs_tool = tool_version.clone().unwrap_or_else(|| "unknown".into());
    if *protocol != PROTOCOL_VERSION || tool_version.as_deref() != Some(TOOL_VERSION) {
        return Err(HandshakeError::Mismatch {
            worker: worker.to_string(),
            theirs: *protocol,
            theirs_tool,
            ours: PROTOCOL_VERSION,
            ours_tool: TOOL_VERSION.to_string(),
        });
    }
    Ok(Identity {
        host: host.clone(),
        device: device.clone(),
        probe: probe.clone(),
        protocol: *protocol,
        tool_version: theirs_tool,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(protocol: u32, tool: Option<&str>) -> Event {
        Event::Hello {
            id: 1,
            protocol,
            tool_version: tool.map(str::to_string),
            host: Some("gpu-box-2".into()),
            probe: ProbeInfo {
                driver_version: "12.8".into(),
                nvrtc_version: None,
                devices: vec![],
            },
            device: None,
        }
    }

    #[test]
    fn versions_must_agree_and_a_mismatch_names_both() {
        let id = check("gpu-box-2:1", &hello(PROTOCOL_VERSION, Some(TOOL_VERSION))).unwrap();
        assert_eq!(id.name(1), "gpu-box-2:1");
        let e = check("gpu-box-2:1", &hello(2, None))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!(
                "worker gpu-box-2:1 runs atrex-tui unknown (protocol 2); this is atrex-tui {TOOL_VERSION} (protocol {PROTOCOL_VERSION}): install the same atrex-tui version on both sides"
            )
        );
        let e = check("b:0", &hello(PROTOCOL_VERSION, Some("0.0.9")))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("runs atrex-tui 0.0.9") && e.contains(TOOL_VERSION),
            "{e}"
        );
    }
}
