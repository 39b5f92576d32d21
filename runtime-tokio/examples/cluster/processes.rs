//! The node processes: started by re-executing this example, faulted with real signals.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::member::MemberArgs;

/// One node process.
pub(crate) struct Member {
    pub(crate) index: u32,
    pub(crate) address: String,
    /// Its management endpoint's base URL (`http://host:port/`).
    pub(crate) management: String,
    child: Child,
}

/// Where a node process listens, for the live view: its index, its address and its management
/// endpoint.
#[derive(Clone, Debug)]
pub(crate) struct Listening {
    pub(crate) index: u32,
    pub(crate) address: String,
    pub(crate) management: String,
}

/// Exits this node process when the harness's end of its stdin closes (the harness ended,
/// however it ended), so no node outlives a run.
pub(crate) fn exit_with_harness() {
    std::thread::spawn(|| {
        let mut sink = [0u8; 64];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        std::process::exit(0);
    });
}

/// Starts the node process `args` describes (inside network namespace `netns` if given: the
/// chaos mode), logging next to its journal, and waits for the address it listens on.
pub(crate) fn spawn(args: &MemberArgs, netns: Option<&str>) -> Result<Member, String> {
    let index = args.index;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let log = std::fs::File::create(args.journal.with_extension("log"))
        .map_err(|e| format!("node {index} log: {e}"))?;
    let mut command = match netns {
        Some(netns) => {
            let mut command = Command::new("ip");
            command.args(["netns", "exec", netns]).arg(exe);
            command
        }
        None => Command::new(exe),
    };
    command
        .arg("member")
        .args(args.to_args())
        .stdout(Stdio::piped())
        // The node exits when this pipe closes: it never outlives the harness.
        .stdin(Stdio::piped())
        .env(
            "RUST_LOG",
            std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
        )
        .stderr(Stdio::from(log));
    let mut child = command
        .spawn()
        .map_err(|e| format!("spawn node {index}: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    // From here on the process is owned by `member`: dropping it on an error kills it.
    let mut member = Member {
        index,
        address: String::new(),
        management: String::new(),
        child,
    };
    // Two short lines: a node that cannot start exits, which ends the read.
    let mut lines = BufReader::new(stdout.take(4096));
    let mut read = |prefix: &str| {
        let mut line = String::new();
        lines
            .read_line(&mut line)
            .map_err(|e| format!("node {index}: {e}"))?;
        line.strip_prefix(prefix)
            .map(|a| a.trim().to_string())
            .ok_or_else(|| format!("node {index} did not start: {line:?}"))
    };
    member.address = read("listening ")?;
    member.management = read("management ")?;
    Ok(member)
}

impl Member {
    /// Where it listens.
    pub(crate) fn listening(&self) -> Listening {
        Listening {
            index: self.index,
            address: self.address.clone(),
            management: self.management.clone(),
        }
    }

    /// The OS process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (`KILL`, `STOP`, `CONT`, `TERM`) with the system's `kill`.
    pub(crate) fn signal(&self, signal: &str) -> Result<(), String> {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("kill: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("kill -{signal} {} failed", self.pid()))
        }
    }

    /// Whether the process has exited (a downed member stops by itself).
    pub(crate) fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Waits up to `limit` for the process to exit; whether it did.
    pub(crate) fn wait_exit(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        // Never leave a node behind: resumed first in case it was paused.
        let _ = self.signal("CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
