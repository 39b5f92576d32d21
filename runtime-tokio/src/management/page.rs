//! `/`: a self-contained HTML page of the cluster as this member sees it (no scripts, styles
//! or images from anywhere else), reloading itself every two seconds: its readiness, the
//! members with their status and what each hosts, each entity type's shards, dead letters by
//! reason and the recent events.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use axum::extract::State;
use axum::response::{Html, IntoResponse, Response};
use shoal_core::{Command, MemberId, MemberStatus, MembershipView, Readiness, RegionStats, Reply};

use super::recent::{Recent, lock};
use super::{Shared, failed};

/// Seconds between reloads.
const RELOAD: u32 = 2;

/// One entity type's regions, or why they are not known.
type TypeStats = (String, Result<Vec<RegionStats>, String>);

pub(super) async fn page(State(served): Shared) -> Response {
    let node = &served.node;
    let (view, readiness) = match (node.view().await, node.readiness().await) {
        (Ok(view), Ok(readiness)) => (view, readiness),
        (Err(error), _) | (_, Err(error)) => return failed(&error),
    };
    let mut types = Vec::new();
    for t in &readiness.types {
        let entity_type = t.entity_type.clone();
        let stats = match node
            .command(Command::GetClusterShardingStats { entity_type })
            .await
        {
            Ok(Reply::ClusterShardingStats { regions, .. }) => Ok(regions),
            Ok(_) => Err("unexpected answer".to_string()),
            Err(error) => Err(error.to_string()),
        };
        types.push((t.entity_type.to_string(), stats));
    }
    let recent = lock(&served.recent);
    Html(render(node.member(), &view, &readiness, &types, &recent)).into_response()
}

fn render(
    me: MemberId,
    view: &MembershipView,
    readiness: &Readiness,
    types: &[TypeStats],
    recent: &Recent,
) -> String {
    let mut page = String::new();
    let _ = write!(
        page,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{RELOAD}\"><title>Shoal: {me}</title>\
         <style>{STYLE}</style></head><body><h1>The cluster as {me} sees it</h1>"
    );
    let _ = match readiness.waiting_for() {
        None => write!(page, "<p class=\"ready\">ready for traffic</p>"),
        Some(why) => write!(page, "<p class=\"waiting\">not ready: {}</p>", escape(&why)),
    };
    members(&mut page, me, view, types);
    for (entity_type, stats) in types {
        shards(&mut page, entity_type, stats);
    }
    page.push_str(
        "<h2>Dead letters</h2><table id=\"dead-letters\"><tr><th>reason</th><th>count</th></tr>",
    );
    for (reason, count) in &recent.dead_letters {
        let _ = write!(page, "<tr><td>{}</td><td>{count}</td></tr>", escape(reason));
    }
    page.push_str("</table><h2>Recent events</h2><ol id=\"events\">");
    for (at, line) in recent.events.iter().rev() {
        let _ = write!(page, "<li>{at:.1} s: {}</li>", escape(line));
    }
    page.push_str("</ol></body></html>");
    page
}

/// The members table: one row per member, its status cell coloured by status.
fn members(page: &mut String, me: MemberId, view: &MembershipView, types: &[TypeStats]) {
    let mut hosted: BTreeMap<MemberId, (usize, u64)> = BTreeMap::new();
    for region in types.iter().filter_map(|(_, s)| s.as_ref().ok()).flatten() {
        let entry = hosted.entry(region.region).or_default();
        entry.0 += region.shards.len();
        entry.1 += region
            .shards
            .iter()
            .map(|(_, n)| u64::from(*n))
            .sum::<u64>();
    }
    let (leader, oldest) = (view.leader(me), view.oldest_up(None));
    page.push_str(
        "<h2>Members</h2><table id=\"members\"><tr><th>status</th><th>member</th>\
         <th>address</th><th>roles</th><th>version</th><th>reachable</th><th>shards</th>\
         <th>entities</th><th></th></tr>",
    );
    for m in view.members() {
        let (shards, entities) = hosted.get(&m.id).copied().unwrap_or_default();
        let address = m
            .address
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        let roles: Vec<&str> = m.roles.iter().map(String::as_str).collect();
        let mut notes = Vec::new();
        for (is, note) in [
            (m.id == me, "this member"),
            (Some(m.id) == leader, "leader"),
        ] {
            if is {
                notes.push(note);
            }
        }
        if Some(m.id) == oldest {
            notes.push("oldest (coordinators)");
        }
        let reachable = if m.reachable { "yes" } else { "<b>no</b>" };
        let _ = write!(
            page,
            "<tr class=\"member\"><td class=\"status {}\">{:?}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{reachable}</td><td>{shards}</td><td>{entities}</td>\
             <td>{}</td></tr>",
            status_class(m.status),
            m.status,
            m.id,
            escape(&address),
            escape(&roles.join(", ")),
            m.app_version,
            notes.join(", "),
        );
    }
    page.push_str("</table>");
}

/// One entity type's regions and their shards.
fn shards(page: &mut String, entity_type: &str, stats: &Result<Vec<RegionStats>, String>) {
    let _ = write!(page, "<h2>Shards of {}</h2>", escape(entity_type));
    let regions = match stats {
        Ok(regions) => regions,
        Err(error) => {
            let _ = write!(
                page,
                "<p class=\"waiting\">not known: {}</p>",
                escape(error)
            );
            return;
        }
    };
    page.push_str(
        "<table class=\"shards\"><tr><th>region</th><th>shards</th><th>entities</th></tr>",
    );
    for region in regions {
        let entities: u64 = region.shards.iter().map(|(_, n)| u64::from(*n)).sum();
        let list: Vec<String> = region
            .shards
            .iter()
            .map(|(s, n)| format!("{s} ({n})"))
            .collect();
        let _ = write!(
            page,
            "<tr><td>{}</td><td title=\"{}\">{}</td><td>{entities}</td></tr>",
            region.region,
            list.join(" "),
            region.shards.len(),
        );
    }
    page.push_str("</table>");
}

fn status_class(status: MemberStatus) -> &'static str {
    match status {
        MemberStatus::Up => "up",
        MemberStatus::Joining => "joining",
        MemberStatus::Leaving | MemberStatus::Exiting => "leaving",
        MemberStatus::Down => "down",
    }
}

/// Text made safe inside HTML.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// The page's style: the status colours are the simulator's picture's.
const STYLE: &str = "body{font-family:sans-serif;margin:16px;color:#222}\
    table{border-collapse:separate;border-spacing:0 4px;margin-bottom:12px}\
    th,td{text-align:left;padding:4px 10px}\
    td.status{width:90px}\
    .up{background:#a9dfa0}.joining{background:#ffe9a8}.leaving{background:#bcd7f5}\
    .down{background:#f3a6a6}\
    p.ready{color:#1a7f1a;font-weight:bold}p.waiting{color:#b00;font-weight:bold}\
    ol{font-size:90%}";
