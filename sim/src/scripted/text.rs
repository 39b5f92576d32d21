//! Readable renderings of messages and events for the scripted cluster's trace.

use shoal_core::Body;

/// A compact rendering of a message body.
pub fn describe(body: &Body) -> String {
    match body {
        Body::Forward {
            shard,
            entity,
            payload,
        } => {
            let text = String::from_utf8_lossy(&payload.0);
            format!("Forward {{ {shard}, {entity}, {text:?} }}")
        }
        other => compact(&format!("{other:?}")),
    }
}

/// Shortens ids in `Debug` output: `ShardId(3)` → `s3`, member ids → `n1#1`, the entity type
/// `counter` → `counter`.
pub(crate) fn compact(debug: &str) -> String {
    const MEMBER: &str = "MemberId { node: NodeId(";
    const INCARNATION: &str = "), incarnation: Incarnation(";
    let mut text = debug.replace("EntityType(\"counter\")", "counter");
    while let Some(start) = text.find(MEMBER) {
        let rest = &text[start + MEMBER.len()..];
        let Some(node_end) = rest.find(INCARNATION) else {
            break;
        };
        let inc_start = node_end + INCARNATION.len();
        let Some(inc_len) = rest[inc_start..].find(") }") else {
            break;
        };
        let inc_end = inc_start + inc_len;
        let short = format!("n{}#{}", &rest[..node_end], &rest[inc_start..inc_end]);
        let end = start + MEMBER.len() + inc_end + 3;
        text.replace_range(start..end, &short);
    }
    while let Some(start) = text.find("ShardId(") {
        let Some(len) = text[start..].find(')') else {
            break;
        };
        let end = start + len;
        let short = format!("s{}", &text[start + 8..end]);
        text.replace_range(start..=end, &short);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_shortened() {
        let debug = "HostShard { shard: ShardId(3), region: MemberId { node: NodeId(2), \
                     incarnation: Incarnation(1) } }";
        assert_eq!(compact(debug), "HostShard { shard: s3, region: n2#1 }");
    }
}
