#!/bin/bash
# Import time and peak memory for product and recall data at the size the
# FDA and openFDA publish (docs/benchmarks.md, "Product and recall data").
# Generates, in the published formats: ndctext.zip with PRODUCTS products
# and PACKAGES packages (product.txt, package.txt: the FDA's header,
# tab-separated, Windows-1252, CRLF, row lengths like the real ones), and
# a drug enforcement download of RECALLS records (about 3.5 kB each, half
# with openfda.package_ndc, a fifth ongoing), plain and zipped; then runs
# each import RUNS times under /usr/bin/time -v (wall time, maximum
# resident set size) into a fresh state directory, and once more over
# data already in place (the swap).
# Usage: benches/products.sh BINARY [PRODUCTS] [PACKAGES] [RECALLS] [RUNS]
set -eu
BIN=$1
PRODUCTS=${2:-110000}
PACKAGES=${3:-130000}
RECALLS=${4:-17000}
RUNS=${5:-3}
WORK=$(mktemp -d /var/tmp/scangate-products.XXXX)
trap 'rm -rf "$WORK"' EXIT
python3 - "$WORK" "$PRODUCTS" "$PACKAGES" "$RECALLS" <<'PY'
import json, random, sys, zipfile
work, n_prod, n_pkg, n_rec = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rnd = random.Random(7)
ph = ("PRODUCTID\tPRODUCTNDC\tPRODUCTTYPENAME\tPROPRIETARYNAME\tPROPRIETARYNAMESUFFIX\t"
      "NONPROPRIETARYNAME\tDOSAGEFORMNAME\tROUTENAME\tSTARTMARKETINGDATE\tENDMARKETINGDATE\t"
      "MARKETINGCATEGORYNAME\tAPPLICATIONNUMBER\tLABELERNAME\tSUBSTANCENAME\t"
      "ACTIVE_NUMERATOR_STRENGTH\tACTIVE_INGRED_UNIT\tPHARM_CLASSES\tDEASCHEDULE\t"
      "NDC_EXCLUDE_FLAG\tLISTING_RECORD_CERTIFIED_THROUGH\r\n")
kh = ("PRODUCTID\tPRODUCTNDC\tNDCPACKAGECODE\tPACKAGEDESCRIPTION\tSTARTMARKETINGDATE\t"
      "ENDMARKETINGDATE\tNDC_EXCLUDE_FLAG\tSAMPLE_PACKAGE\r\n")
words = ["HYDROCHLORIDE", "ACETAMINOPHEN", "OXYCODONE", "SODIUM", "CHLORIDE", "Pharmac\xe9utique",
         "TABLET", "FILM COATED", "EXTENDED RELEASE", "Opioid Agonist [EPC]", "Opioid Agonists [MoA]"]
def text(k):
    return " ".join(rnd.choice(words) for _ in range(k))
products, packages, ndcs = [ph], [kh], []
for i in range(n_prod):
    if i % 3 == 0:
        pndc, segs = f"{i % 9000 + 1000:04d}-{i // 9000:04d}", 2
    elif i % 3 == 1:
        pndc, segs = f"{i % 90000 + 10000:05d}-{i // 9000 % 1000:03d}", 2
    else:
        pndc, segs = f"{i % 90000 + 10000:05d}-{i // 9000 + 1000:04d}", 1
    pid = f"{pndc}_{rnd.getrandbits(128):032x}"
    dea = rnd.choice(["", "", "", "", "", "", "", "CII", "CIII", "CIV", "CV"])
    row = [pid, pndc, "HUMAN PRESCRIPTION DRUG", text(2), "", text(4), "TABLET, FILM COATED", "ORAL",
           "20190115", rnd.choice(["", "", "", "20251231"]), "ANDA", f"ANDA{i:06d}", text(3),
           text(6), "5; 325", "mg/1; mg/1", text(8), dea, "N", "20261231"]
    products.append("\t".join(row) + "\r\n")
    k = 1 if i >= n_pkg - n_prod else 2
    for j in range(k if i < n_pkg - n_prod else 1):
        pkg = f"{j + 1:0{segs}d}"
        ndc = f"{pndc}-{pkg}"
        ndcs.append(ndc)
        packages.append("\t".join([pid, pndc, ndc, "100 TABLET, FILM COATED in 1 BOTTLE (" + ndc + ")",
                                   "20190115", "", "N", rnd.choice("NNNNNNNNNY")]) + "\r\n")
with zipfile.ZipFile(f"{work}/ndctext.zip", "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("product.txt", "".join(products).encode("cp1252"))
    z.writestr("package.txt", "".join(packages).encode("cp1252"))
print(f"directory: {len(products) - 1} products, {len(packages) - 1} packages, "
      f"{sum(map(len, products)) // 2**20} + {sum(map(len, packages)) // 2**20} MiB text", file=sys.stderr)
results = []
for i in range(n_rec):
    some = rnd.sample(ndcs, 3)
    results.append({
        "recall_number": f"D-{i:04d}-{2012 + i % 13}",
        "status": rnd.choice(["Ongoing", "Terminated", "Terminated", "Terminated", "Completed"]),
        "classification": rnd.choice(["Class I", "Class II", "Class II", "Class III"]),
        "product_type": "Drugs",
        "product_description": text(40) + f", NDC {some[0]}, " + text(20),
        "code_info": "Lot #: " + ", ".join(f"{rnd.choice('ABCX')}{rnd.randint(1000, 99999)}" for _ in range(6))
                     + ", Exp 12/2025; " + text(20),
        "reason_for_recall": text(60), "distribution_pattern": text(30), "recalling_firm": text(3),
        "address_1": "1 Main St", "city": "Columbus", "state": "OH", "postal_code": "43215",
        "country": "United States", "product_quantity": "10,000 bottles",
        "recall_initiation_date": "20231220", "report_date": "20240117", "event_id": str(90000 + i),
        "voluntary_mandated": "Voluntary: Firm initiated", "initial_firm_notification": "Letter",
        "center_classification_date": "20240110", "termination_date": "", "more_code_info": "",
        "openfda": {"package_ndc": some[1:], "brand_name": [text(2)], "generic_name": [text(3)],
                    "manufacturer_name": [text(3)], "spl_id": [f"{rnd.getrandbits(128):032x}"],
                    "unii": ["67K5T9JN8C"], "rxcui": ["1049621"]} if i % 2 else {},
    })
doc = json.dumps({"meta": {"disclaimer": "Do not rely on openFDA to make decisions regarding medical care.",
                           "last_updated": "2024-05-01",
                           "results": {"skip": 0, "limit": n_rec, "total": n_rec}},
                  "results": results}, indent=2)
with open(f"{work}/drug-enforcement-0001-of-0001.json", "w") as f:
    f.write(doc)
with zipfile.ZipFile(f"{work}/drug-enforcement-0001-of-0001.json.zip", "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("drug-enforcement-0001-of-0001.json", doc)
print(f"recalls: {n_rec} records, {len(doc) // 2**20} MiB JSON", file=sys.stderr)
PY
ls -l "$WORK"
measure() { # label args...
    local label=$1; shift
    local out
    out=$( { /usr/bin/time -v "$BIN" "$@" >/dev/null; } 2>&1 )
    printf '%-28s wall %8s  max RSS %6d KiB\n' "$label" \
        "$(grep 'Elapsed (wall' <<<"$out" | awk '{print $NF}')" \
        "$(grep 'Maximum resident' <<<"$out" | awk '{print $NF}')"
}
for r in $(seq "$RUNS"); do
    S=$WORK/state.$r
    printf '[gateway]\nstate_dir = "%s"\n' "$S" >"$WORK/c.toml"
    measure "products (fresh) $r" products import -c "$WORK/c.toml" "$WORK/ndctext.zip"
    measure "products (swap) $r" products import -c "$WORK/c.toml" "$WORK/ndctext.zip"
    measure "recalls json $r" recalls import -c "$WORK/c.toml" "$WORK/drug-enforcement-0001-of-0001.json"
    measure "recalls zip $r" recalls import -c "$WORK/c.toml" "$WORK/drug-enforcement-0001-of-0001.json.zip"
    ls -l "$S"/*.sqlite | awk '{print "  " $5, $9}'
done
