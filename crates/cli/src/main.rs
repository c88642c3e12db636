//! `causeway`: the command (its code is the `causeway_cli` library).

// The server's scans build and drop millions of small values (spans, path events) from
// several threads at once; mimalloc's per-thread heaps serve that faster than glibc's
// malloc (BENCHMARKS.md, expectations over 100K stored paths).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    causeway_cli::main()
}
