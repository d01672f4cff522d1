//! Embeds every study file of `scenarios/` (and the seed registry) in the binary, so
//! `wanperf reproduce` runs from anywhere; `--scenarios DIR` reads edited copies instead.

use std::fmt::Write as _;

fn main() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("scenarios/ beside the crates")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".toml"))
        .collect();
    names.sort();
    let mut out =
        String::from("/// Every file of scenarios/: (name, text).\npub const SCENARIOS: &[(&str, &str)] = &[\n");
    for n in &names {
        let path = dir.join(n).canonicalize().expect("a readable scenario file");
        println!("cargo:rerun-if-changed={}", path.display());
        let _ = writeln!(out, "    ({n:?}, include_str!({:?})),", path.display().to_string());
    }
    out += "];\n";
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("scenarios.rs");
    std::fs::write(dest, out).expect("write scenarios.rs");
}
