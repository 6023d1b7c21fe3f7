//! Write a base image of the check corpus, damaged by recipes, to a file:
//!
//! ```sh
//! cargo run -p nilfs-conformance --example corrupt -- ours /tmp/x.img 'inode[/big].i_size = 1000'
//! nilref check /tmp/x.img
//! ```
//!
//! The recipes are those of tests/check-corpus (see `nilfs_conformance::corrupt`).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [base, out, recipes @ ..] = args.as_slice() else {
        eprintln!(
            "usage: corrupt BASE OUT [RECIPE...]  (bases: {:?})",
            nilfs_conformance::corrupt::BASES
        );
        std::process::exit(2);
    };
    let dev = nilfs_conformance::corrupt::base(base).unwrap_or_else(|e| panic!("{e}"));
    for r in recipes {
        let recipe = nilfs_conformance::corrupt::Recipe::parse(r).unwrap_or_else(|e| panic!("{e}"));
        let a =
            nilfs_conformance::corrupt::apply(&dev, &recipe).unwrap_or_else(|e| panic!("{r}: {e}"));
        eprintln!(
            "{r}: byte {} of the device, {:#x} -> {:#x}",
            a.site.byte, a.old, a.new
        );
    }
    nilfs::device::export_image(&dev, std::path::Path::new(out)).unwrap();
}
