"""footage import / review / label / list through the CLI, on real and written footage."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from inspector.cli import main
from inspector.footage.store import FootageStore
from inspector.footage.writer import FootageWriter


def run(capsys, *args: str) -> tuple[int, str]:
    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    return rc, out.out + out.err


def _subset_manifest(mt: Path, tmp: Path, n: int = 40) -> Path:
    """~40 rows of the real splits.csv, all classes, pointing at the real images."""
    rows = list(csv.DictReader((mt / "splits.csv").read_text().splitlines()))
    by_label: dict[str, list[dict]] = {}
    for r in rows:
        by_label.setdefault(r["label"], []).append(r)
    picked = []
    while len(picked) < n:
        for lab in sorted(by_label):
            if by_label[lab] and len(picked) < n:
                picked.append(by_label[lab].pop(0))
    path = tmp / "subset.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["image", "mask", "label", "split"])
        w.writeheader()
        for r in picked:
            w.writerow(r)  # paths relative to the data set: imported with --images mt
    return path


def test_csv_import_of_magnetic_tile_then_reimport_adds_nothing(magnetic_tile, tmp_path, capsys):
    man = _subset_manifest(magnetic_tile, tmp_path)
    store = tmp_path / "store"
    args = ("--format", "csv", "--images", magnetic_tile, "--store", store)
    rc, out = run(capsys, "footage", "import", man, *args)
    assert rc == 0 and "40 new, 0 already present" in out, out
    rc, out = run(capsys, "footage", "import", man, *args)
    assert rc == 0 and "0 new, 40 already present" in out, out
    with FootageStore(store) as s:
        recs = s.records()
        assert len(recs) == 40
        assert {r.label for r in recs} == {"free", "blowhole", "break", "crack", "fray", "uneven"}
        assert all(r.mask_path for r in recs) and all(r.source_format == "csv" for r in recs)
        assert {r.source_split for r in recs} <= {"train", "val", "test"}
        # The store's split is by hash, whatever the manifest said.
        from inspector.footage.store import split_of

        assert all(r.split == split_of(r.frame_id) for r in recs)
        img = s.load_image(recs[0])
        src = cv2.imread(str(magnetic_tile / recs[0].source_file), cv2.IMREAD_GRAYSCALE)
        if src is None:
            src = cv2.imread(recs[0].source_file, cv2.IMREAD_GRAYSCALE)
        assert np.array_equal(img, src)  # lossless: the stored frame is the decoded source


def test_csv_split_filter_keeps_only_those_rows(magnetic_tile, tmp_path, capsys):
    man = _subset_manifest(magnetic_tile, tmp_path)
    want = sum(1 for r in csv.DictReader(man.read_text().splitlines()) if r["split"] == "test")
    rc, out = run(
        capsys,
        "footage",
        "import",
        man,
        "--format",
        "csv",
        "--split",
        "test",
        "--images",
        magnetic_tile,
        "--store",
        tmp_path / "s",
    )
    assert rc == 0 and f"{want} new" in out, out
    with FootageStore(tmp_path / "s") as s:
        assert {r.source_split for r in s.records()} == {"test"}


def test_masks_import_of_mt_fray(magnetic_tile, tmp_path, capsys):
    src = magnetic_tile / "MT_Fray" / "Imgs"
    args = ("footage", "import", src, "--format", "masks", "--label", "fray")
    rc, out = run(capsys, *args, "--store", tmp_path / "s")
    assert rc == 0 and "32 new, 0 already present, 0 skipped" in out, out
    rc, out = run(capsys, *args, "--store", tmp_path / "s")
    assert "0 new, 32 already present" in out
    with FootageStore(tmp_path / "s") as s:
        recs = s.records()
        assert len(recs) == 32 and {r.label for r in recs} == {"fray"}
        assert all(s.load_mask(r) is not None and s.load_mask(r).any() for r in recs)


def _panel(i: int, shape=(60, 80)) -> np.ndarray:
    return np.random.default_rng(i).integers(0, 256, shape, dtype=np.uint8)


def test_voc_set_written_here_with_a_broken_xml_and_a_missing_image(tmp_path, capsys):
    voc = tmp_path / "voc"
    (voc / "Annotations").mkdir(parents=True)
    (voc / "JPEGImages").mkdir()
    for i in range(4):
        cv2.imwrite(str(voc / "JPEGImages" / f"im{i}.png"), _panel(i))
        obj = (
            "<object><name>scratch</name><bndbox><xmin>5</xmin><ymin>6</ymin>"
            "<xmax>20</xmax><ymax>30</ymax></bndbox></object>"
            if i % 2
            else ""
        )
        (voc / "Annotations" / f"im{i}.xml").write_text(
            f"<annotation><filename>im{i}.png</filename><size><width>80</width>"
            f"<height>60</height></size>{obj}</annotation>"
        )
    (voc / "Annotations" / "broken.xml").write_text("<annotation><filename>")
    (voc / "Annotations" / "ghost.xml").write_text(
        "<annotation><filename>ghost.png</filename></annotation>"
    )
    rc, out = run(capsys, "footage", "import", voc, "--format", "voc", "--store", tmp_path / "s")
    assert rc == 0 and "4 new, 0 already present, 2 skipped" in out, out
    assert "broken.xml" in out and "not valid VOC XML" in out
    # The skip names the XML file and where the image was looked for.
    assert "ghost.xml: <filename>: no such image 'ghost.png' (tried " in out
    with FootageStore(tmp_path / "s") as s:
        recs = {Path(r.source_file).name: r for r in s.records()}
        assert recs["im1.png"].label == "scratch" and recs["im0.png"].label == "ok"
        b = recs["im1.png"].boxes[0]
        assert (b.x0, b.y0, b.x1, b.y1) == (4, 5, 20, 30)


def test_coco_set_written_here_with_a_corrupt_image(tmp_path, capsys):
    coco = tmp_path / "coco"
    coco.mkdir()
    images = []
    for i in range(3):
        cv2.imwrite(str(coco / f"c{i}.png"), _panel(20 + i))
        images.append({"id": i, "file_name": f"c{i}.png", "width": 80, "height": 60})
    (coco / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)  # cut short
    images.append({"id": 9, "file_name": "bad.png", "width": 80, "height": 60})
    images.append({"id": 10, "file_name": "c0.png", "width": 99, "height": 60})  # wrong size
    doc = {
        "images": images,
        "categories": [{"id": 1, "name": "dent"}],
        "annotations": [{"id": 1, "image_id": 2, "category_id": 1, "bbox": [10, 10, 5, 5]}],
    }
    (coco / "annotations.json").write_text(json.dumps(doc))
    store = tmp_path / "s"
    rc, out = run(capsys, "footage", "import", coco, "--format", "coco", "--store", store)
    assert rc == 0 and "3 new, 0 already present, 2 skipped" in out, out
    assert "truncated PNG" in out and "annotation says 99x60" in out
    with FootageStore(store) as s:
        labels = sorted(r.label for r in s.records())
    assert labels == ["dent", "ok", "ok"]


def test_station_import_of_what_the_writer_wrote(tmp_path, capsys):
    w = FootageWriter(tmp_path / "station", keep_ok_every=1, max_bytes=None)
    docs = []
    for i in range(6):
        verdict = "defect" if i % 2 else "ok"
        doc = {
            "schema": "inspector.result/1",
            "id": f"r{i}",
            "part_id": f"p{i}",
            "verdict": verdict,
            "label": "crack" if i % 2 else "ok",
            "confidence": 0.4 if i == 2 else 0.9,
            "error": None,
        }
        docs.append(doc)
        assert w.record(_panel(40 + i), doc)
    # A frame without its result (a copy cut short) and a stray temp file are not imported.
    stray = tmp_path / "station" / "frames" / "zz"
    stray.mkdir()
    cv2.imwrite(str(stray / ("f" * 64 + ".png")), _panel(99))
    (stray / ".tmp-123.png").write_bytes(b"partial")
    store = tmp_path / "s"
    rc, out = run(
        capsys, "footage", "import", tmp_path / "station", "--format", "station", "--store", store
    )
    assert rc == 0 and "6 new, 0 already present, 1 skipped" in out, out
    assert "unmatched frame" in out
    rc, out = run(
        capsys, "footage", "import", tmp_path / "station", "--format", "station", "--store", store
    )
    assert "0 new, 6 already present" in out
    with FootageStore(store) as s:
        recs = s.records()
        assert {r.label_source for r in recs} == {"station-verdict"}
        assert sorted(r.result["id"] for r in recs) == [f"r{i}" for i in range(6)]
        review = s.needs_review()
    assert [why for _, why in review] == ["low confidence (0.40)"]


def test_review_sheets_and_label_csv(tmp_path, capsys):
    store = tmp_path / "s"
    flat = tmp_path / "cls"
    for i in range(5):
        d = flat / ("ok" if i < 3 else "dent")
        d.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(d / f"x{i}.png"), _panel(60 + i))
    run(capsys, "footage", "import", flat, "--format", "folder", "--store", store)
    with FootageStore(store) as s:
        for k in range(3):
            s.add(_panel(80 + k), source_format="test")  # unlabelled
        unl = sorted(r.frame_id for r in s.records() if r.label is None)
        some = sorted(r.frame_id for r in s.records() if r.label == "ok")[0]
    rc, out = run(
        capsys,
        "footage",
        "review",
        "--store",
        store,
        "--batch",
        "2",
        "--sheet-dir",
        tmp_path / "sheets",
    )
    assert rc == 0 and "3 frames need review" in out, out
    assert all(f in out for f in unl)
    assert sorted(p.name for p in (tmp_path / "sheets").iterdir()) == [
        "review_001.csv",
        "review_001.png",
        "review_002.csv",
        "review_002.png",
    ]
    assert cv2.imread(str(tmp_path / "sheets" / "review_001.png")) is not None
    fixes = tmp_path / "fixes.csv"
    fixes.write_text(
        "frame_id,label\n"
        f"{unl[0]},dent\n"
        f"{unl[1][:10]},ok\n"
        f"{'ab' * 32},ok\n"
        f"{unl[2]}\n"
        f"{some},bad label\n"
    )
    rc, out = run(capsys, "footage", "label", "--store", store, "--csv", fixes)
    assert rc == 1
    assert "2 applied, 0 unchanged, 1 unknown frame ids, 2 bad rows" in out, out
    assert f"{fixes}:4: unknown frame id" in out
    assert f"{fixes}:5: expected 2 columns" in out and f"{fixes}:6: bad label" in out
    with FootageStore(store) as s:
        assert s.get(unl[0]).label == "dent" and s.get(unl[0]).label_source == "operator"
        assert s.get(unl[1]).label == "ok"
        assert [r.frame_id for r, _ in s.needs_review()] == [unl[2]]
    rc, out = run(capsys, "footage", "list", "--store", store)
    assert rc == 0 and "8 frames" in out and "need review: 1" in out


def test_user_errors_are_one_line_exit_2(tmp_path, capsys):
    rc, out = run(capsys, "footage", "list", "--store", tmp_path / "none")
    assert rc == 2 and "does not exist" in out
    rc, out = run(
        capsys,
        "footage",
        "import",
        tmp_path / "none",
        "--format",
        "masks",
        "--store",
        tmp_path / "s",
    )
    assert rc == 2 and "does not exist" in out
    bad = tmp_path / "m.csv"
    bad.write_text("path,label\nx.png,ok\n")
    rc, out = run(capsys, "footage", "import", bad, "--format", "csv", "--store", tmp_path / "s")
    assert rc == 2 and "expected a header" in out


@pytest.mark.parametrize("fmt", ["folder", "voc"])
def test_split_filter_needs_csv(tmp_path, capsys, fmt):
    rc, out = run(
        capsys,
        "footage",
        "import",
        tmp_path,
        "--format",
        fmt,
        "--split",
        "test",
        "--store",
        tmp_path / "s",
    )
    assert rc == 2 and "needs --format csv" in out
