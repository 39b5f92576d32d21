//! The layering check: finds import circles between the modules of one crate.
//!
//! A crate's modules form a tree; their `use` edges must form floors, each module importing only
//! from modules below it. A parent and its own descendants may use each other (a child sees its
//! parent's items, the parent declares its children); any other edge is lifted to the two
//! siblings under the lowest common ancestor, and the siblings of every folder must import
//! each other without a circle. Test code (`mod tests`, `tests.rs`) is left out: tests may
//! reach across the floors.
//!
//! The reading is syntactic, which is enough for this workspace's style: every path starting
//! with `crate::`, `super::` or `self::` (in `use` trees, braces expanded, and inline), resolved
//! through the modules' `pub use` re-exports to the module that defines the name.

mod read;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use read::{absolute, collect_files, module_of, paths_in, strip_comments, strip_tests};

/// A module path inside a crate: `[]` is the crate root, `["region", "shard"]` is
/// `crate::region::shard`.
pub type ModulePath = Vec<String>;

/// One crate's non-test source: its modules and the paths each of them names.
#[derive(Debug, Default)]
pub struct Crate {
    /// Every module, with the `crate::`-relative paths its code names (resolved from `super::`
    /// and `self::`).
    modules: BTreeMap<ModulePath, Vec<Vec<String>>>,
    /// `pub use` re-exports: (module, name) → the path the name comes from.
    reexports: BTreeMap<(ModulePath, String), Vec<String>>,
}

impl Crate {
    /// Reads every `.rs` file under `src` (the folder holding `lib.rs` or `main.rs`).
    pub fn read(src: &Path) -> std::io::Result<Self> {
        let mut krate = Self::default();
        let mut files = Vec::new();
        collect_files(src, &mut files)?;
        for file in files {
            let relative = file.strip_prefix(src).expect("under src");
            let Some(module) = module_of(relative) else {
                continue;
            };
            let text = fs::read_to_string(&file)?;
            krate.add(module, &text);
        }
        Ok(krate)
    }

    /// Adds one module's source text (used by [`Crate::read`], and by tests with made-up trees).
    pub fn add(&mut self, module: ModulePath, text: &str) {
        let code = strip_tests(&strip_comments(text));
        let mut named = Vec::new();
        for (path, is_reexport) in paths_in(&code) {
            let Some(absolute) = absolute(&module, &path) else {
                continue;
            };
            if is_reexport && let Some(name) = absolute.last() {
                self.reexports
                    .insert((module.clone(), name.clone()), absolute.clone());
            }
            named.push(absolute);
        }
        self.modules.entry(module).or_default().extend(named);
    }

    /// The module a `crate::`-relative path names an item of (or is): the longest prefix that is
    /// a module, followed through re-exports.
    fn target(&self, path: &[String]) -> ModulePath {
        let mut module: ModulePath = Vec::new();
        let mut hops = 0;
        let mut rest: Vec<String> = path.to_vec();
        while let Some(next) = rest.first().cloned() {
            let mut child = module.clone();
            child.push(next.clone());
            if self.modules.contains_key(&child) {
                module = child;
                rest.remove(0);
            } else if let Some(source) = self.reexports.get(&(module.clone(), next)) {
                hops += 1;
                if hops > 16 || source.as_slice() == path {
                    break;
                }
                let mut followed = source.clone();
                followed.extend(rest.drain(1..));
                module = Vec::new();
                rest = followed;
            } else {
                break;
            }
        }
        module
    }

    /// The import edges between sibling modules, by the folder (parent module) they sit in.
    pub fn sibling_edges(&self) -> BTreeMap<ModulePath, BTreeSet<(String, String)>> {
        let mut edges: BTreeMap<ModulePath, BTreeSet<(String, String)>> = BTreeMap::new();
        for (from, paths) in &self.modules {
            for path in paths {
                let to = self.target(path);
                let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
                if common == from.len() || common == to.len() {
                    continue; // the same module, or a parent and its descendant
                }
                edges
                    .entry(from[..common].to_vec())
                    .or_default()
                    .insert((from[common].clone(), to[common].clone()));
            }
        }
        edges
    }

    /// Every import circle: per folder, each strongly connected group of two or more siblings,
    /// named `folder: a → b → … `.
    pub fn circles(&self) -> Vec<String> {
        let mut found = Vec::new();
        for (folder, edges) in self.sibling_edges() {
            for group in strongly_connected(&edges) {
                let place = if folder.is_empty() {
                    "crate".to_string()
                } else {
                    folder.join("::")
                };
                let arrows: Vec<String> = edges
                    .iter()
                    .filter(|(a, b)| group.contains(a) && group.contains(b))
                    .map(|(a, b)| format!("{a} → {b}"))
                    .collect();
                found.push(format!("{place}: {}", arrows.join(", ")));
            }
        }
        found
    }

    /// The modules the crate root's children import, for the layering report: child → the
    /// siblings it imports.
    pub fn root_imports(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for module in self.modules.keys().filter(|m| m.len() == 1) {
            out.entry(module[0].clone()).or_default();
        }
        if let Some(edges) = self.sibling_edges().get(&Vec::new()) {
            for (a, b) in edges {
                out.entry(a.clone()).or_default().insert(b.clone());
            }
        }
        out
    }
}

/// One floor of a crate: its number (0 at the bottom) and its modules.
pub type Floor = (u32, Vec<String>);

/// The floors a crate root's documentation writes as a table: every line `//! | N | ... |`
/// whose first cell is a number, its modules the names in backticks in the second cell (before
/// any parenthesis that explains them).
pub fn floors_in_docs(lib_rs: &str) -> Vec<Floor> {
    let mut floors = Vec::new();
    for line in lib_rs.lines() {
        let Some(row) = line.strip_prefix("//! |") else {
            continue;
        };
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (Some(number), Some(modules)) = (cells.first(), cells.get(1)) else {
            continue;
        };
        let Ok(number) = number.parse::<u32>() else {
            continue;
        };
        let mut names = Vec::new();
        let mut depth = 0;
        let mut rest: &str = modules;
        while let Some(at) = rest.find(['`', '(', ')']) {
            match rest.as_bytes()[at] {
                b'(' => depth += 1,
                b')' => depth -= 1,
                _ => {
                    let after = &rest[at + 1..];
                    let Some(end) = after.find('`') else { break };
                    if depth == 0 {
                        names.push(after[..end].to_string());
                    }
                    rest = &after[end + 1..];
                    continue;
                }
            }
            rest = &rest[at + 1..];
        }
        floors.push((number, names));
    }
    floors
}

/// The imports between the crate root's children that do not go down the given floors (a
/// module may import only modules on lower floors), and the children the table leaves out.
pub fn floor_breaks(krate: &Crate, floors: &[Floor]) -> Vec<String> {
    let floor_of = |module: &str| {
        floors
            .iter()
            .find(|(_, modules)| modules.iter().any(|m| m == module))
            .map(|(floor, _)| *floor)
    };
    let mut breaks = Vec::new();
    for (module, imports) in krate.root_imports() {
        let Some(floor) = floor_of(&module) else {
            breaks.push(format!("{module} is on no floor"));
            continue;
        };
        for import in imports {
            match floor_of(&import) {
                Some(below) if below < floor => {}
                _ => breaks.push(format!("{module} (floor {floor}) imports {import}")),
            }
        }
    }
    breaks
}

/// The strongly connected groups of two or more nodes, in a stable order.
fn strongly_connected(edges: &BTreeSet<(String, String)>) -> Vec<BTreeSet<String>> {
    let mut nodes: BTreeSet<&String> = BTreeSet::new();
    let mut next: BTreeMap<&String, Vec<&String>> = BTreeMap::new();
    for (a, b) in edges {
        nodes.insert(a);
        nodes.insert(b);
        next.entry(a).or_default().push(b);
    }
    // Reachability closure: the graphs here have a few dozen nodes.
    let reach = |from: &String| {
        let mut seen: BTreeSet<&String> = BTreeSet::new();
        let mut stack = vec![from];
        while let Some(n) = stack.pop() {
            for m in next.get(n).into_iter().flatten() {
                if seen.insert(m) {
                    stack.push(m);
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&String, BTreeSet<&String>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut groups: Vec<BTreeSet<String>> = Vec::new();
    let mut placed: BTreeSet<&String> = BTreeSet::new();
    for n in &nodes {
        if placed.contains(n) || !reachable[n].contains(n) {
            continue;
        }
        let group: BTreeSet<&String> = reachable[n]
            .iter()
            .filter(|m| reachable[*m].contains(n))
            .copied()
            .collect();
        placed.extend(group.iter().copied());
        if group.len() >= 2 {
            groups.push(group.into_iter().cloned().collect());
        }
    }
    groups
}
