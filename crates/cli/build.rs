//! Builds the socket-capture preload library (`causeway-sockcap`, optimised) for
//! `causeway capture` to carry inside the binary: one file to install, and a library that
//! always matches the command reading its logs.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let sockcap = manifest_dir.join("../sockcap");
    println!("cargo:rerun-if-changed={}", sockcap.join("src").display());
    // The log format the library writes is a crate of its own.
    let format = manifest_dir.join("../capture-format");
    println!("cargo:rerun-if-changed={}", format.join("src").display());
    println!(
        "cargo:rerun-if-changed={}",
        format.join("Cargo.toml").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        sockcap.join("Cargo.toml").display()
    );
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    // A target directory of its own: the outer build holds the lock on the shared one.
    let target = out.join("sockcap-target");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "--lib", "--manifest-path"])
        .arg(sockcap.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        // The outer build's flags (coverage, sanitizers, a target) are not the library's.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("CARGO_TARGET_DIR")
        // Under `cargo clippy` the library is linted as a workspace member already.
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env("CARGO_INCREMENTAL", "0")
        .status()
        .expect("running cargo to build the preload library");
    assert!(
        status.success(),
        "building the preload library (causeway-sockcap) failed"
    );
    let library = target.join("release/libcauseway_sockcap.so");
    assert!(library.exists(), "cargo built no {}", library.display());
    println!(
        "cargo:rustc-env=CAUSEWAY_SOCKCAP_LIBRARY={}",
        library.display()
    );
}
