//! The chaos mode's network: one Linux network namespace per node and one for the harness,
//! each joined by a veth pair to a bridge in a hub namespace, all created by this run (as
//! root) and deleted when it ends. Links are cut with blackhole routes (a namespace silently
//! drops what it sends to an address; cutting one direction only is a one-way partition) and
//! degraded with `tc netem` (latency, jitter, loss). Nothing leaves the namespaces: the
//! addresses are private to them.

use std::fs::File;
use std::os::fd::AsFd;
use std::process::Command;

/// A host of the lab.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(crate) enum Host {
    /// The harness (client and proxy node).
    Client,
    /// Node process `index`.
    Node(u32),
}

/// The namespaces of one run.
pub(crate) struct Lab {
    prefix: String,
    nodes: u32,
}

/// Runs `ip` (or `ip netns exec <ns> <tool>`) with `args`; an error names the command.
fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

impl Lab {
    /// Creates the namespaces for `nodes` node processes and the harness; an error says why
    /// namespaces are not available here (not root, no `ip`, no kernel support).
    pub(crate) fn create(nodes: u32) -> Result<Self, String> {
        let lab = Self {
            prefix: format!("shoal{}", std::process::id()),
            nodes,
        };
        // Built step by step; whatever was made is deleted by `drop` if a step fails.
        let hub = lab.hub();
        run("ip", &["netns", "add", &hub])?;
        run("ip", &["-n", &hub, "link", "add", "br0", "type", "bridge"])?;
        run("ip", &["-n", &hub, "link", "set", "br0", "up"])?;
        for host in lab.hosts() {
            lab.attach(host)?;
        }
        Ok(lab)
    }

    fn hub(&self) -> String {
        format!("{}hub", self.prefix)
    }

    /// Every host: the harness, then the nodes.
    pub(crate) fn hosts(&self) -> Vec<Host> {
        std::iter::once(Host::Client)
            .chain((0..self.nodes).map(Host::Node))
            .collect()
    }

    /// The namespace of `host`.
    pub(crate) fn namespace(&self, host: Host) -> String {
        match host {
            Host::Client => format!("{}c", self.prefix),
            Host::Node(i) => format!("{}n{i}", self.prefix),
        }
    }

    /// The address of `host` (private to the lab's namespaces).
    pub(crate) fn ip(&self, host: Host) -> String {
        match host {
            Host::Client => "10.77.0.2".into(),
            Host::Node(i) => format!("10.77.0.{}", 10 + i),
        }
    }

    fn attach(&self, host: Host) -> Result<(), String> {
        let (ns, hub) = (self.namespace(host), self.hub());
        // Interface names are at most 15 bytes: the hub side is named by the host alone.
        let port = match host {
            Host::Client => "vc".to_string(),
            Host::Node(i) => format!("vn{i}"),
        };
        run("ip", &["netns", "add", &ns])?;
        run("ip", &["-n", &ns, "link", "set", "lo", "up"])?;
        run(
            "ip",
            &[
                "-n", &hub, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns",
                &ns,
            ],
        )?;
        run(
            "ip",
            &["-n", &hub, "link", "set", &port, "master", "br0", "up"],
        )?;
        let address = format!("{}/24", self.ip(host));
        run("ip", &["-n", &ns, "addr", "add", &address, "dev", "eth0"])?;
        run("ip", &["-n", &ns, "link", "set", "eth0", "up"])
    }

    /// Moves the calling thread (call it before any other thread starts: threads inherit it)
    /// into the harness's namespace.
    pub(crate) fn enter_client(&self) -> Result<(), String> {
        let path = format!("/var/run/netns/{}", self.namespace(Host::Client));
        let file = File::open(&path).map_err(|e| format!("{path}: {e}"))?;
        rustix::thread::move_into_link_name_space(
            file.as_fd(),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )
        .map_err(|e| format!("setns {path}: {e}"))
    }

    /// Drops everything each host of `from` sends to each host of `to` (a one-way cut; call
    /// it both ways for a symmetric partition).
    pub(crate) fn cut(&self, from: &[Host], to: &[Host]) -> Result<(), String> {
        for &a in from {
            for &b in to {
                let target = format!("{}/32", self.ip(b));
                let ns = self.namespace(a);
                run("ip", &["-n", &ns, "route", "add", "blackhole", &target])?;
            }
        }
        Ok(())
    }

    /// Restores every link cut.
    pub(crate) fn heal(&self) -> Result<(), String> {
        for host in self.hosts() {
            let ns = self.namespace(host);
            run("ip", &["-n", &ns, "route", "flush", "type", "blackhole"])?;
        }
        Ok(())
    }

    /// Degrades what every node sends with a `tc` qdisc (e.g. `netem delay 30ms 10ms loss
    /// 2%`); `None` removes it.
    pub(crate) fn degrade(&self, qdisc: Option<&str>) -> Result<(), String> {
        for i in 0..self.nodes {
            let ns = self.namespace(Host::Node(i));
            let mut args = vec!["netns", "exec", &ns, "tc", "qdisc"];
            match qdisc {
                Some(qdisc) => {
                    args.extend(["replace", "dev", "eth0", "root"]);
                    args.extend(qdisc.split(' '));
                }
                None => args.extend(["del", "dev", "eth0", "root"]),
            }
            run("ip", &args)?;
        }
        Ok(())
    }
}

/// Degrades the links with `netem` (latency, jitter, loss) or, on a kernel built without it,
/// with `tbf` (a rate limit whose queue adds delay and drops what waits too long): the qdisc
/// applied.
pub(crate) fn degrade_links(lab: &Lab, netem: &str) -> Result<String, String> {
    let netem = format!("netem {netem}");
    match lab.degrade(Some(&netem)) {
        Ok(()) => Ok(netem),
        Err(why) if why.contains("qdisc kind is unknown") => {
            let tbf = "tbf rate 8mbit burst 32kb latency 40ms";
            lab.degrade(Some(tbf))?;
            Ok(format!("{tbf} (this kernel has no netem)"))
        }
        Err(why) => Err(why),
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Stop whatever still runs inside, then delete the namespaces (their veths go too).
        let mut namespaces: Vec<String> = self
            .hosts()
            .into_iter()
            .map(|host| self.namespace(host))
            .collect();
        namespaces.push(self.hub());
        for ns in &namespaces {
            if let Ok(output) = Command::new("ip").args(["netns", "pids", ns]).output() {
                for pid in String::from_utf8_lossy(&output.stdout).split_whitespace() {
                    if pid != std::process::id().to_string() {
                        let _ = run("kill", &["-KILL", pid]);
                    }
                }
            }
            let _ = run("ip", &["netns", "del", ns]);
        }
    }
}
