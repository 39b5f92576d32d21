//! No crate of the workspace has an import circle between its modules (see
//! `shoal_tests::layering` for the rule and how it is read).

use std::path::Path;

use shoal_tests::layering::{Crate, Floor, floor_breaks, floors_in_docs};

fn circles_in(src: &str) -> Vec<String> {
    read(src).circles()
}

#[test]
fn no_crate_has_an_import_circle() {
    let mut report = Vec::new();
    for src in [
        "core/src",
        "sim/src",
        "runtime-tokio/src",
        "tests/src",
        "fuzz/src",
    ] {
        for circle in circles_in(src) {
            report.push(format!("{src}: {circle}"));
        }
    }
    assert!(report.is_empty(), "import circles:\n{}", report.join("\n"));
}

/// The floors a crate root's documentation writes.
fn floors_of(lib_rs: &str) -> Vec<Floor> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(lib_rs);
    let floors = floors_in_docs(&std::fs::read_to_string(path).expect("a crate root"));
    assert!(
        floors.len() >= 5,
        "{lib_rs}: no floor table in its documentation"
    );
    floors
}

fn read(src: &str) -> Crate {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(src);
    Crate::read(&root).expect("readable sources")
}

#[test]
fn the_core_keeps_its_floors() {
    let breaks = floor_breaks(&read("core/src"), &floors_of("core/src/lib.rs"));
    assert!(
        breaks.is_empty(),
        "core/src/lib.rs's floors broken:\n{}",
        breaks.join("\n")
    );
}

#[test]
fn the_runtime_keeps_its_floors() {
    let breaks = floor_breaks(
        &read("runtime-tokio/src"),
        &floors_of("runtime-tokio/src/lib.rs"),
    );
    assert!(
        breaks.is_empty(),
        "runtime-tokio/src/lib.rs's floors broken:\n{}",
        breaks.join("\n")
    );
}

#[test]
fn only_run_imports_the_simulator() {
    let importers: Vec<String> = read("sim/src")
        .root_imports()
        .into_iter()
        .filter(|(_, imports)| imports.contains("simulator"))
        .map(|(module, _)| module)
        .collect();
    assert_eq!(
        importers,
        vec!["run".to_string()],
        "sim/src/lib.rs's layering"
    );
}

#[test]
fn a_climbing_import_breaks_the_floors() {
    let mut krate = Crate::default();
    krate.add(vec![], "mod id;\nmod message;\nmod node;\n");
    krate.add(
        vec!["message".into()],
        "use crate::id::NodeId;\nuse crate::node::Node;\n",
    );
    krate.add(vec!["node".into()], "use crate::message::Body;\n");
    krate.add(vec!["id".into()], "pub struct NodeId;\n");
    let docs = "//! | floor | modules |\n//! |---|---|\n//! | 2 | `node` (the top, not `id`) |\n//! | 1 | `message` |\n";
    let floors = floors_in_docs(docs);
    assert_eq!(
        floors,
        vec![
            (2, vec!["node".to_string()]),
            (1, vec!["message".to_string()])
        ]
    );
    assert_eq!(
        floor_breaks(&krate, &floors),
        vec![
            "id is on no floor".to_string(),
            "message (floor 1) imports id".into(),
            "message (floor 1) imports node".into()
        ]
    );
}

#[test]
fn a_circle_through_a_reexport_and_a_use_group_is_found() {
    let mut krate = Crate::default();
    krate.add(vec![], "mod a;\nmod b;\nmod c;\npub use c::Thing;\n");
    krate.add(
        vec!["a".into()],
        "use crate::{b::{One, Two as T}, Thing};\n",
    );
    krate.add(vec!["b".into()], "fn f() { let _ = super::c::make(); }\n");
    krate.add(
        vec!["c".into()],
        "// use crate::a::X; is only a comment\n#[cfg(test)]\nuse crate::a::Y;\nfn g() -> crate::a::Z { todo!() }\n",
    );
    let circles = krate.circles();
    assert_eq!(
        circles,
        vec!["crate: a → b, a → c, b → c, c → a".to_string()]
    );
}

#[test]
fn parents_and_children_may_use_each_other_and_test_code_is_left_out() {
    let mut krate = Crate::default();
    krate.add(vec![], "mod a;\nmod b;\n");
    krate.add(
        vec!["a".into()],
        "mod inner;\nuse inner::X;\npub(crate) struct Y;\n",
    );
    krate.add(
        vec!["a".into(), "inner".into()],
        "use super::Y;\nuse crate::b::Z;\n",
    );
    krate.add(
        vec!["b".into()],
        "pub struct Z;\n#[cfg(test)]\nmod tests {\n    use crate::a::Y;\n}\n",
    );
    assert!(krate.circles().is_empty(), "{:?}", krate.circles());
    assert_eq!(krate.sibling_edges()[&Vec::<String>::new()].len(), 1);
}

#[test]
#[ignore = "prints the report for the docs"]
fn print_root_imports() {
    for src in [
        "core/src",
        "sim/src",
        "runtime-tokio/src",
        "tests/src",
        "fuzz/src",
    ] {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(src);
        println!("{src}");
        for (module, imports) in Crate::read(&root).unwrap().root_imports() {
            println!(
                "  {module} → {}",
                imports.into_iter().collect::<Vec<_>>().join(", ")
            );
        }
    }
}
