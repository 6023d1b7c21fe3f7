//! Writes the images the fuzz corpora's inputs make (fuzz/corpus/image and
//! fuzz/corpus/image_ops, through `nilfs_conformance::fuzz::image_device`
//! and `image_ops_device`) into a folder, raw and sparse (an image_ops
//! image with a `.what` file naming its base and damage), for the
//! hostile-image campaign: `cargo run -p nilfs-conformance --example
//! fuzz_images -- DIR [N [CORPUS]]` (at most N of each corpus, default
//! all; CORPUS is a folder with `image/` and `image_ops/` inputs, default
//! fuzz/corpus, so that hand-cut inputs can be rendered too), then
//! `nilref campaign hostile --images DIR`.

use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(args.next().expect("usage: fuzz_images DIR [N [CORPUS]]"));
    let limit: usize = match args.next().as_deref() {
        None | Some("all") => usize::MAX,
        Some(n) => n.parse().expect("N: a number or `all`"),
    };
    std::fs::create_dir_all(&out).unwrap();
    let corpus = args.next().map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus"),
        PathBuf::from,
    );
    let mut written = 0;
    for target in ["image", "image_ops"] {
        let Ok(dir) = std::fs::read_dir(corpus.join(target)) else {
            continue;
        };
        let mut inputs: Vec<PathBuf> = dir.map(|e| e.unwrap().path()).collect();
        inputs.sort();
        for p in inputs.into_iter().take(limit) {
            let data = std::fs::read(&p).unwrap();
            let made = match target {
                "image" => nilfs_conformance::fuzz::image_device(&data).map(|d| (d, None)),
                _ => nilfs_conformance::fuzz::image_ops_device(&data).map(|(d, w)| (d, Some(w))),
            };
            let Some((dev, what)) = made else { continue };
            let name = format!("{target}-{}.img", p.file_name().unwrap().to_string_lossy());
            nilfs::device::export_image(&dev, &out.join(&name)).unwrap();
            // What an image_ops input did to its base, beside the image.
            if let Some(w) = what {
                std::fs::write(out.join(format!("{name}.what")), w + "\n").unwrap();
            }
            written += 1;
        }
    }
    println!("{written} images in {}", out.display());
}
