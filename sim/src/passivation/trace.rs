//! An access trace: which entity each access names, entities numbered densely so that the
//! optimal's bookkeeping is plain vectors.

use std::collections::BTreeMap;
use std::path::Path;

use shoal_core::EntityId;

/// A sequence of accesses, each naming one entity by its index into the trace's entities.
#[derive(Clone, Debug)]
pub struct Trace {
    name: String,
    description: String,
    ids: Vec<EntityId>,
    accesses: Vec<usize>,
}

impl Trace {
    /// A trace of `keys` (any ordered keys, one per access), each distinct key an entity named
    /// by `name_of` in the order of first access.
    pub(super) fn from_keys<K: Ord + Clone>(
        name: impl Into<String>,
        description: impl Into<String>,
        keys: impl IntoIterator<Item = K>,
        name_of: impl Fn(&K) -> String,
    ) -> Self {
        let mut index: BTreeMap<K, usize> = BTreeMap::new();
        let mut ids = Vec::new();
        let accesses = (keys.into_iter())
            .map(|key| {
                *index.entry(key).or_insert_with_key(|key| {
                    ids.push(EntityId::new(name_of(key)));
                    ids.len() - 1
                })
            })
            .collect();
        Self {
            name: name.into(),
            description: description.into(),
            ids,
            accesses,
        }
    }

    /// The trace written in `text`: one entity id per line, surrounding whitespace ignored,
    /// blank lines skipped. Errs if there is no id at all.
    pub fn parse(name: &str, text: &str) -> Result<Self, String> {
        let lines = text.lines().map(str::trim).filter(|line| !line.is_empty());
        let trace = Self::from_keys(name, "entity ids one per line", lines, |line| {
            (*line).to_string()
        });
        if trace.is_empty() {
            return Err(format!("trace {name} has no entity ids (one per line)"));
        }
        Ok(trace)
    }

    /// The trace in the file at `path` (see [`Trace::parse`]), named by the file's name.
    pub fn read_file(path: &Path) -> Result<Self, String> {
        let shown = path.display();
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read trace file {shown}: {e}"))?;
        let name = path.file_name().map_or_else(
            || shown.to_string(),
            |name| name.to_string_lossy().into_owned(),
        );
        let trace = Self::parse(&name, &text).map_err(|e| format!("{shown}: {e}"))?;
        Ok(Self {
            description: format!("read from {shown}"),
            ..trace
        })
    }

    /// The trace's short name (a table's column).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the trace is, in a sentence's words.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// How many accesses the trace has.
    pub fn len(&self) -> usize {
        self.accesses.len()
    }

    /// Whether the trace has no access.
    pub fn is_empty(&self) -> bool {
        self.accesses.is_empty()
    }

    /// How many distinct entities the trace accesses.
    pub fn distinct(&self) -> usize {
        self.ids.len()
    }

    /// Each access's entity, as an index below [`Trace::distinct`].
    pub fn accesses(&self) -> &[usize] {
        &self.accesses
    }

    /// The entity of index `index`.
    pub fn id(&self, index: usize) -> &EntityId {
        &self.ids[index]
    }
}
