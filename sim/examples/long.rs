#![allow(missing_docs, clippy::disallowed_methods)]
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let nodes: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100);
    let secs: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(60);
    let opts = sim::steady_options(nodes, std::time::Duration::from_secs(secs));
    let t = std::time::Instant::now();
    let r = sim::run(opts);
    let wall = t.elapsed().as_secs_f64();
    println!(
        "{} events, {:.1} simulated s, wall {:.2} s, {:.3} M ev/s, {:.0}x, digest {:016x}",
        r.events,
        r.simulated.as_secs_f64(),
        wall,
        r.events as f64 / wall / 1e6,
        r.simulated.as_secs_f64() / wall,
        r.digest
    );
}
