//! Writes the images the fuzz corpora's inputs make (fuzz/corpus/image,
//! image_ops and image_mutate, through `nilfs_conformance::fuzz::image_device`,
//! `image_ops_device` and `image_mutate_case`) into a folder, raw and
//! sparse (an image_ops or image_mutate image with a `.what` file naming
//! its base and damage; an image_mutate image also with its workload, a
//! `.jsonl` file that `nilref exec --device` runs on another
//! implementation), for the hostile-image campaign: `cargo run -p
//! nilfs-conformance --example fuzz_images -- DIR [N [CORPUS]]` (at most N
//! of each corpus, default all; CORPUS is a folder with `image/`,
//! `image_ops/` and `image_mutate/` inputs, default fuzz/corpus, so that
//! hand-cut inputs and a finding's inputs can be rendered too), then
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
    for target in ["image", "image_ops", "image_mutate"] {
        let Ok(dir) = std::fs::read_dir(corpus.join(target)) else {
            continue;
        };
        let mut inputs: Vec<PathBuf> = dir.map(|e| e.unwrap().path()).collect();
        inputs.sort();
        for p in inputs.into_iter().take(limit) {
            let data = std::fs::read(&p).unwrap();
            let mut workload = None;
            let made = match target {
                "image" => nilfs_conformance::fuzz::image_device(&data).map(|d| (d, None)),
                "image_ops" => {
                    nilfs_conformance::fuzz::image_ops_device(&data).map(|(d, w)| (d, Some(w)))
                }
                _ => nilfs_conformance::fuzz::image_mutate_case(&data).map(|c| {
                    workload = Some(c.lines.iter().map(|l| format!("{l}\n")).collect::<String>());
                    (c.dev, Some(c.what))
                }),
            };
            let Some((dev, what)) = made else { continue };
            let name = format!("{target}-{}.img", p.file_name().unwrap().to_string_lossy());
            nilfs::device::export_image(&dev, &out.join(&name)).unwrap();
            // What an image_ops input did to its base, beside the image.
            if let Some(w) = what {
                std::fs::write(out.join(format!("{name}.what")), w + "\n").unwrap();
            }
            if let Some(w) = workload {
                std::fs::write(out.join(format!("{name}.jsonl")), w).unwrap();
            }
            written += 1;
        }
    }
    println!("{written} images in {}", out.display());
}
