//! How options print: one line, the knobs a reader needs to understand a failing seed.

use std::fmt;
use std::time::Duration;

use shoal_core::AllocationStrategyConfig;

use super::Options;

impl fmt::Display for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on = |d: Option<Duration>| {
            d.map_or_else(|| "off".to_owned(), |d| format!("every ~{}s", d.as_secs()))
        };
        write!(
            f,
            "family={} membership={:?} nodes={} max_nodes={} entities={} shards={} duration={}s message_every={}ms downing={:?} detection<={}ms buffer={} crash={} crash_oldest={} partition={} break={} leave={} join={} clog={} pause={} duplicate={:.3} drift={}ppm ignore_stop={:.2} passivate={:.3} slow_stop={}ms",
            self.family.name(),
            self.cluster.membership,
            self.cluster.nodes,
            self.cluster.max_nodes,
            self.workload.entities,
            self.cluster.shards,
            self.duration.as_secs(),
            self.workload.message_every.as_millis(),
            self.cluster.downing,
            self.cluster.detection_delay.as_millis(),
            self.cluster.buffer_size,
            on(self.faults.crash_every),
            on(self.faults.crash_oldest_every),
            on(self.faults.partition_every),
            on(self.faults.break_every),
            on(self.faults.leave_every),
            on(self.faults.join_every),
            on(self.faults.clog_every),
            on(self.faults.pause_every),
            self.network.duplicate,
            self.cluster.drift_ppm,
            self.host.ignore_stop,
            self.host.passivate,
            self.host.slow_stop.as_millis(),
        )?;
        if let Some(l) = self.network.slow_link {
            write!(
                f,
                " slow_link={}->{}+{}ms",
                l.from,
                l.to,
                l.latency.as_millis()
            )?;
        }
        if let Some(b) = self.cluster.bystander {
            write!(f, " bystander={b}")?;
        }
        if let Some(d) = self.faults.down_every {
            write!(f, " down=every ~{}s", d.as_secs())?;
        }
        if self.workload.start_entity > 0.0 {
            write!(f, " start_entity={:.3}", self.workload.start_entity)?;
        }
        if self.host.forced_stop > Duration::from_millis(1) {
            write!(f, " forced_stop={}ms", self.host.forced_stop.as_millis())?;
        }
        if self.host.self_stop > 0.0 {
            write!(f, " self_stop={:.3}", self.host.self_stop)?;
        }
        if self.host.asks > 0.0 {
            write!(f, " asks={:.2}", self.host.asks)?;
        }
        if self.cluster.allocation != AllocationStrategyConfig::default() {
            write!(f, " allocation={:?}", self.cluster.allocation)?;
        }
        if self.workload.queries > 0.0 {
            write!(f, " queries={:.3}", self.workload.queries)?;
        }
        if self.workload.explain != super::ExplainQueries::Off {
            write!(f, " explain={:?}", self.workload.explain)?;
        }
        if let Some(slower) = self.network.slow_register_acks {
            write!(f, " slow_register_acks=+{}ms", slower.as_millis())?;
        }
        if let Some(cap) = self.network.outbound_cap {
            write!(f, " outbound_cap={cap}")?;
        }
        if self.network.lanes {
            write!(f, " lanes")?;
        }
        if let Some(limit) = &self.cluster.active_entity_limit {
            write!(f, " limit={}x{:?}", limit.per_region, limit.policy)?;
        }
        if self.cluster.min_registered_regions != 1 {
            write!(
                f,
                " min_registered_regions={}",
                self.cluster.min_registered_regions
            )?;
        }
        if let Some(m) = self.host.mailbox {
            write!(f, " mailbox={}x{}ms", m.capacity, m.service.as_millis())?;
        }
        if self.network.long_tail != 0.001 {
            write!(f, " long_tail={:.4}", self.network.long_tail)?;
        }
        if let Some(p) = &self.persist {
            let unfenced = if p.unfenced { ",unfenced" } else { "" };
            write!(f, " persist=snapshot:{}{unfenced}", p.snapshot_every)?;
        }
        if let Some(d) = &self.delivery {
            let unsuppressed = if d.suppress_duplicates {
                ""
            } else {
                ",duplicates"
            };
            write!(f, " delivery={}x{:.2}{unsuppressed}", d.producers, d.share)?;
        }
        if let Some(d) = &self.direct {
            match d.fault {
                None => write!(f, " direct")?,
                Some(fault) => write!(f, " direct={fault:?}")?,
            }
        }
        if let Some(l) = &self.lease {
            write!(
                f,
                " lease=ttl:{}ms,fail:{:.3},lost:{:.3},outages:{},isolations:{}",
                l.ttl.as_millis(),
                l.failure_rate,
                l.lost_rate,
                l.outages.len(),
                l.isolations.len()
            )?;
            if l.coordinator {
                write!(f, ",coordinator")?;
            }
            if l.store_ttl_factor != 1.0 {
                write!(f, ",store_ttl:{:.2}", l.store_ttl_factor)?;
            }
            if l.no_margin {
                write!(f, ",no_margin")?;
            }
        }
        if let Some(m) = &self.remember {
            write!(
                f,
                " remember={:?},fail:{:.3},timeout:{:.3},tail:{:.3},outages:{}",
                m.recovery,
                m.failure_rate,
                m.timeout_rate,
                m.tail_rate,
                m.outages.len()
            )?;
        }
        if let Some(t) = self.cluster.tight_timers {
            write!(
                f,
                " tight_timers=handoff:{}ms,start:{}ms,rebalance:{}ms",
                t.handoff_timeout.as_millis(),
                t.shard_start_timeout.as_millis(),
                t.rebalance_interval.as_millis()
            )?;
        }
        Ok(())
    }
}
