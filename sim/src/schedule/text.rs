//! A schedule's text form: `@12.500 crash n3 restart 20.000; @30.000 partition n1,n2 one-way
//! heal 15.000; @60.000 full-restart 12 shards restart 10.000; @70.000 store-outage 8.000; ...`, as printed by `Display`
//! and read back by `FromStr`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use shoal_core::NodeId;

use super::{Act, Action, MAX_PAUSE, Schedule};

fn secs(d: Duration) -> String {
    format!("{}.{:03}", d.as_secs(), d.subsec_millis())
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@{} ", secs(self.at))?;
        match &self.act {
            Act::Crash {
                node,
                restart_after,
            } => write!(f, "crash {node} restart {}", secs(*restart_after)),
            Act::CrashOldest { restart_after } => {
                write!(f, "crash-oldest restart {}", secs(*restart_after))
            }
            Act::Partition {
                side,
                one_way,
                heal_after,
            } => {
                let side: Vec<String> = side.iter().map(ToString::to_string).collect();
                let way = if *one_way { " one-way" } else { "" };
                write!(
                    f,
                    "partition {}{way} heal {}",
                    side.join(","),
                    secs(*heal_after)
                )
            }
            Act::Break { a, b } => write!(f, "break {a}-{b}"),
            Act::Leave { node, by: None } => write!(f, "leave {node}"),
            Act::Leave { node, by: Some(by) } => write!(f, "leave {node} by {by}"),
            Act::Down { node, by } => write!(f, "down {node} by {by}"),
            Act::Heal => write!(f, "heal"),
            Act::Join => write!(f, "join"),
            Act::Clog { node, peer, lasts } => match peer {
                Some(p) => write!(f, "clog {node}-{p} {}", secs(*lasts)),
                None => write!(f, "clog {node} {}", secs(*lasts)),
            },
            Act::Pause { node, lasts } => write!(f, "pause {node} {}", secs(*lasts)),
            Act::PauseHolder { lasts } => write!(f, "pause-holder {}", secs(*lasts)),
            Act::StoreOutage { lasts } => write!(f, "store-outage {}", secs(*lasts)),
            Act::FullRestart {
                shards,
                restart_after,
            } => write!(
                f,
                "full-restart {shards} shards restart {}",
                secs(*restart_after)
            ),
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let actions: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&actions.join("; "))
    }
}

/// Why a schedule did not parse.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct ScheduleError(pub String);

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad schedule: {}", self.0)
    }
}

impl std::error::Error for ScheduleError {}

fn parse_secs(text: &str) -> Result<Duration, ScheduleError> {
    text.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| ScheduleError(format!("{text:?} is not a number of seconds")))
}

/// A pause's length `d` in the action `text`: at most [`MAX_PAUSE`].
fn parse_pause(d: &str, text: &str) -> Result<Duration, ScheduleError> {
    let lasts = parse_secs(d)?;
    if lasts > MAX_PAUSE {
        let max = MAX_PAUSE.as_secs();
        return Err(ScheduleError(format!(
            "pauses last at most {max} s (longer ones would get a member downed while its \
             entities run on): {text:?}"
        )));
    }
    Ok(lasts)
}

fn parse_node(text: &str) -> Result<NodeId, ScheduleError> {
    text.strip_prefix('n')
        .and_then(|n| n.parse().ok())
        .map(NodeId)
        .ok_or_else(|| ScheduleError(format!("{text:?} is not a node (n<number>)")))
}

fn parse_pair(text: &str) -> Result<(NodeId, Option<NodeId>), ScheduleError> {
    match text.split_once('-') {
        Some((a, b)) => Ok((parse_node(a)?, Some(parse_node(b)?))),
        None => Ok((parse_node(text)?, None)),
    }
}

impl FromStr for Action {
    type Err = ScheduleError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let bad = || ScheduleError(format!("cannot read action {text:?}"));
        let at = words
            .first()
            .and_then(|w| w.strip_prefix('@'))
            .ok_or_else(bad)?;
        let at = parse_secs(at)?;
        let act = match words[1..] {
            ["crash", node, "restart", d] => Act::Crash {
                node: parse_node(node)?,
                restart_after: parse_secs(d)?,
            },
            ["crash-oldest", "restart", d] => Act::CrashOldest {
                restart_after: parse_secs(d)?,
            },
            ["partition", side, ref rest @ ..] => {
                let (one_way, heal) = match rest {
                    ["one-way", "heal", d] => (true, d),
                    ["heal", d] => (false, d),
                    _ => return Err(bad()),
                };
                Act::Partition {
                    side: side.split(',').map(parse_node).collect::<Result<_, _>>()?,
                    one_way,
                    heal_after: parse_secs(heal)?,
                }
            }
            ["break", pair] => match parse_pair(pair)? {
                (a, Some(b)) => Act::Break { a, b },
                _ => return Err(bad()),
            },
            ["leave", node] => Act::Leave {
                node: parse_node(node)?,
                by: None,
            },
            ["leave", node, "by", by] => Act::Leave {
                node: parse_node(node)?,
                by: Some(parse_node(by)?),
            },
            ["down", node, "by", by] => Act::Down {
                node: parse_node(node)?,
                by: parse_node(by)?,
            },
            ["full-restart", shards, "shards", "restart", d] => Act::FullRestart {
                shards: shards
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| ScheduleError(format!("{shards:?} is not a shard count")))?,
                restart_after: parse_secs(d)?,
            },
            ["store-outage", d] => Act::StoreOutage {
                lasts: parse_secs(d)?,
            },
            ["join"] => Act::Join,
            ["heal"] => Act::Heal,
            ["clog", pair, d] => {
                let (node, peer) = parse_pair(pair)?;
                Act::Clog {
                    node,
                    peer,
                    lasts: parse_secs(d)?,
                }
            }
            ["pause", node, d] => Act::Pause {
                node: parse_node(node)?,
                lasts: parse_pause(d, text)?,
            },
            ["pause-holder", d] => Act::PauseHolder {
                lasts: parse_pause(d, text)?,
            },
            _ => return Err(bad()),
        };
        Ok(Self { at, act })
    }
}

impl FromStr for Schedule {
    type Err = ScheduleError;

    /// Actions separated by `;`, as [`Schedule`]'s `Display` writes them.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut actions: Vec<Action> = text
            .split(';')
            .filter(|a| !a.trim().is_empty())
            .map(str::parse)
            .collect::<Result<_, _>>()?;
        actions.sort_by_key(|a| a.at);
        Ok(Self(actions))
    }
}
