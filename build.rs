//! Exports the commit the crate is built from as `WEBGPU_LLAMA_COMMIT` (`bench --json` records
//! it): `git rev-parse --short HEAD` when the build script last ran (it reruns when HEAD moves;
//! uncommitted edits are not marked), or "unknown" where git or the repository is missing.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let commit = match git(&["rev-parse", "--short", "HEAD"]) {
        Some(head) => {
            // Rebuild when HEAD moves: its file, and the branch's ref it points at.
            for path in ["HEAD", "packed-refs"].into_iter().map(String::from).chain(git(&["symbolic-ref", "-q", "HEAD"])) {
                if let Some(p) = git(&["rev-parse", "--git-path", &path]).filter(|p| std::path::Path::new(p).exists()) {
                    println!("cargo:rerun-if-changed={p}");
                }
            }
            head
        }
        None => "unknown".to_string(),
    };
    println!("cargo:rustc-env=WEBGPU_LLAMA_COMMIT={commit}");
}
