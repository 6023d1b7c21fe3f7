//! Writes the images the fuzz corpora's inputs make (fuzz/corpus/image and
//! fuzz/corpus/image_ops, through `nilfs_conformance::fuzz::image_device`
//! and `image_ops_device`) into a folder, raw and sparse (an image_ops
//! image with a `.what` file naming its base and damage), for the
//! hostile-image campaign: `cargo run -p nilfs-conformance --example
//! fuzz_images -- DIR [N]` (at most N of each corpus, default all), then
//! `nilref campaign hostile --images DIR`.

use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(args.next().expect("usage: fuzz_images DIR [N]"));
    let limit: usize = args.next().map_or(usize::MAX, |n| n.parse().expect("N"));
    std::fs::create_dir_all(&out).unwrap();
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    let mut written = 0;
    for target in ["image", "image_ops"] {
        let mut inputs: Vec<PathBuf> = std::fs::read_dir(corpus.join(target))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
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
