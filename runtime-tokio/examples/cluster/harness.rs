//! What the tours act on: the node processes, the harness's proxy node and what it sees, the
//! live view, and the figures collected for the summary.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shoal::{MemberId, Region};

use crate::http::Http;
use crate::leasing::Leasing;
use crate::member::{Counter, DowningMode, MemberArgs};
use crate::netns::{Host, Lab};
use crate::processes::{self, Listening, Member};
use crate::remembered::StoreSpec;
use crate::view::View;
use crate::watch::Watch;
use crate::workload;

/// A running demo cluster.
pub(crate) struct Run<'a> {
    pub(crate) view: Arc<View>,
    pub(crate) watch: Watch,
    pub(crate) region: Region<Counter>,
    /// The harness's own (proxy) node.
    pub(crate) node: shoal::Node,
    pub(crate) entities: u32,
    /// Counters messaged once at the start (see `remembered`).
    pub(crate) quiet: std::ops::Range<u32>,
    /// Where the nodes remember their counters.
    pub(crate) store: StoreSpec,
    pub(crate) downing: DowningMode,
    /// The lease store and what uses it.
    pub(crate) leasing: Leasing,
    pub(crate) lab: Option<&'a Lab>,
    pub(crate) dir: PathBuf,
    pub(crate) seeds: Vec<String>,
    pub(crate) members: Vec<Member>,
    /// Where every node process started listens, shared with the live view.
    pub(crate) addresses: Arc<Mutex<Vec<Listening>>>,
    /// The client for the nodes' management endpoints.
    pub(crate) http: Http,
    /// `(figure, value)` rows for the summary, in the order measured.
    pub(crate) figures: Vec<(String, String)>,
    /// Nodes killed with SIGKILL and when (journal clock).
    pub(crate) killed: Vec<(u32, u64)>,
}

/// Where `host` listens: its lab address, or any loopback port without a lab.
pub(crate) fn bind_address(lab: Option<&Lab>, host: Host) -> String {
    match lab {
        Some(lab) => format!("{}:7355", lab.ip(host)),
        None => "127.0.0.1:0".into(),
    }
}

/// Starts node `index` (in its namespace when there is a lab).
pub(crate) fn spawn_member(
    lab: Option<&Lab>,
    dir: &std::path::Path,
    index: u32,
    seeds: &[String],
    (downing, leasing): (DowningMode, &Leasing),
    store: &StoreSpec,
) -> Result<Member, String> {
    let args = MemberArgs {
        index,
        journal: dir.join(format!("node-{index}.journal")),
        bind: bind_address(lab, Host::Node(index)),
        downing,
        store: store.arg(),
        leasing: leasing.clone(),
        seeds: seeds.to_vec(),
    };
    let netns = lab.map(|lab| lab.namespace(Host::Node(index)));
    tokio::task::block_in_place(|| processes::spawn(&args, netns.as_deref()))
}

impl Run<'_> {
    /// Starts node `index`, joining through the seeds.
    pub(crate) fn spawn(&mut self, index: u32) -> Result<(), String> {
        let member = spawn_member(
            self.lab,
            &self.dir,
            index,
            &self.seeds,
            (self.downing, &self.leasing),
            &self.store,
        )?;
        self.view.say(&page_line(&member));
        self.addresses
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(member.listening());
        self.members.push(member);
        Ok(())
    }

    /// Node process `index`.
    pub(crate) fn member(&mut self, index: u32) -> Result<&mut Member, String> {
        self.members
            .iter_mut()
            .find(|m| m.index == index)
            .ok_or_else(|| format!("no node {index}"))
    }

    /// The member id of node `index`, once the harness has seen it Up (at most `bound`).
    pub(crate) async fn id_of(&mut self, index: u32, bound: Duration) -> Result<MemberId, String> {
        let address = self.member(index)?.address.clone();
        let deadline = Instant::now() + bound;
        loop {
            if let Some(id) = self.watch.member_at(&address) {
                return Ok(id);
            }
            if Instant::now() >= deadline {
                return Err(format!("node {index} was not seen Up within {bound:?}"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The shards node `index` hosts, by the coordinator's statistics.
    pub(crate) async fn shards_of(&self, id: MemberId) -> Option<usize> {
        let stats = tokio::time::timeout(Duration::from_secs(2), self.region.stats())
            .await
            .ok()?
            .ok()?;
        Some(
            stats
                .regions
                .iter()
                .find(|r| r.region == id)
                .map_or(0, |r| r.shards.len()),
        )
    }

    /// Waits (at most `bound`) until every counter answers.
    pub(crate) async fn all_answer(&self, bound: Duration) -> Result<(), String> {
        let totals = workload::totals(&self.region, self.entities, bound).await;
        let silent = totals.iter().filter(|t| t.is_none()).count();
        if silent == 0 {
            Ok(())
        } else {
            Err(format!("{silent} counters did not answer within {bound:?}"))
        }
    }

    /// Waits (at most `bound`) until node `index`'s `/ready` answers `ready`; how long it
    /// took. `false` also holds once the node no longer answers (it exited).
    pub(crate) async fn until_ready_is(
        &mut self,
        index: u32,
        ready: bool,
        bound: Duration,
    ) -> Result<Duration, String> {
        let base = self.member(index)?.management.clone();
        let started = Instant::now();
        while started.elapsed() < bound {
            match self.http.ready(&base).await {
                Some(now) if now == ready => return Ok(started.elapsed()),
                None if !ready => return Err(format!("node {index} stopped answering /ready")),
                _ => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
        Err(format!(
            "node {index}'s /ready did not say {ready} within {bound:?}"
        ))
    }

    /// Records a figure for the summary and tells it.
    pub(crate) fn figure(&mut self, name: &str, value: String) {
        self.view.say(&format!("{name}: {value}"));
        self.figures.push((name.to_string(), value));
    }
}

/// Where node `member` listens, and the address of its management page.
pub(crate) fn page_line(member: &Member) -> String {
    format!(
        "node {} listens at {}; its page: {}",
        member.index, member.address, member.management
    )
}

/// `duration` in seconds with one decimal.
pub(crate) fn secs(duration: Duration) -> String {
    format!("{:.1} s", duration.as_secs_f64())
}
