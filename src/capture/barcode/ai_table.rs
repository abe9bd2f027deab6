//! The GS1 Application Identifier table (one cohesive thing: a table of
//! several hundred rows, hence its length).
//!
//! Transcribed from the GS1 Barcode Syntax Dictionary
//! (`gs1/gs1-syntax-dictionary`, `gs1-syntax-dictionary.txt`), which carries the
//! AI table of the GS1 General Specifications in machine-readable form. Each
//! entry gives the AI (or an inclusive AI range), whether the AI has a
//! *predefined length* (flag `*` in the dictionary: no GS needed after it) and
//! the value's components: character set, min/max length, optional or not,
//! and the content check ("linter") that applies.
//!
//! Linters implemented: `csum`, `yymmd0`, `yymmdd`, `hhmm`, `yymmddhh`, `zero`,
//! `yesno`, `pieceoftotal`, `hyphen`. Others named by the dictionary (ISO 3166
//! / 4217 code lists, IBAN, coupon codes, percent-encoding, latitude/longitude,
//! GS1 company-prefix `key` checks, `csumalpha`, …) are not checked here: such
//! values are still checked for character set and length.
//!
//! Lookup is a binary search over this sorted, non-overlapping table; the AI
//! length is known up front from its first two digits (all AIs sharing two
//! leading digits have one length), see [`ai_len_by_prefix`].

/// Character set of a value component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cset {
    /// Digits 0-9.
    N,
    /// GS1 AI encodable character set 82.
    X,
    /// GS1 AI encodable character set 39.
    Y,
    /// GS1 AI encodable character set 64 (base64url, `=` padding at the end).
    Z,
}

/// Content check applied to one component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lint {
    /// No content check beyond character set and length.
    None,
    /// GS1 mod-10 check digit in the last position.
    Csum,
    /// YYMMDD date, DD = 00 allowed (unspecified day = last day of month).
    Yymmd0,
    /// YYMMDD date, real day required.
    Yymmdd,
    /// HHMM time.
    Hhmm,
    /// YYMMDDHH date and hour.
    Yymmddhh,
    /// The single digit 0.
    Zero,
    /// The single digit 0 or 1.
    YesNo,
    /// Four digits: piece number (2) ≤ total (2), both nonzero.
    PieceOfTotal,
    /// The single character `-`.
    Hyphen,
}

/// One component of an AI value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// Character set.
    pub cset: Cset,
    /// Minimum length (when present).
    pub min: u8,
    /// Maximum length.
    pub max: u8,
    /// Optional trailing component.
    pub optional: bool,
    /// Content check.
    pub lint: Lint,
}

/// One AI table entry (a single AI or an inclusive range of AIs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AiEntry {
    /// First AI of the range (inclusive).
    pub first: &'static str,
    /// Last AI of the range (inclusive); equal to `first` for a single AI.
    pub last: &'static str,
    /// Predefined length: no GS separator is needed after the value.
    pub predefined: bool,
    /// Value components, in order.
    pub parts: &'static [Part],
    /// Data title.
    pub title: &'static str,
}

impl AiEntry {
    /// Minimum total value length.
    pub fn min_len(&self) -> usize {
        self.parts
            .iter()
            .filter(|p| !p.optional)
            .map(|p| p.min as usize)
            .sum()
    }

    /// Maximum total value length.
    pub fn max_len(&self) -> usize {
        self.parts.iter().map(|p| p.max as usize).sum()
    }

    /// Human description of the value format in the dictionary's notation,
    /// e.g. `N14,csum` or `X..20` or `N6,yymmdd N4,hhmm`.
    pub fn format(&self) -> String {
        let mut out = String::new();
        for (i, p) in self.parts.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            if p.optional {
                out.push('[');
            }
            out.push(match p.cset {
                Cset::N => 'N',
                Cset::X => 'X',
                Cset::Y => 'Y',
                Cset::Z => 'Z',
            });
            if p.min != p.max {
                out.push_str("..");
            }
            out.push_str(&p.max.to_string());
            if p.optional {
                out.push(']');
            }
            let lint = match p.lint {
                Lint::None => "",
                Lint::Csum => ",csum",
                Lint::Yymmd0 => ",yymmd0",
                Lint::Yymmdd => ",yymmdd",
                Lint::Hhmm => ",hhmm",
                Lint::Yymmddhh => ",yymmddhh",
                Lint::Zero => ",zero",
                Lint::YesNo => ",yesno",
                Lint::PieceOfTotal => ",pieceoftotal",
                Lint::Hyphen => ",hyphen",
            };
            out.push_str(lint);
        }
        out
    }
}

const fn part(cset: Cset, min: u8, max: u8, lint: Lint) -> Part {
    Part {
        cset,
        min,
        max,
        optional: false,
        lint,
    }
}
const fn opt(cset: Cset, min: u8, max: u8, lint: Lint) -> Part {
    Part {
        cset,
        min,
        max,
        optional: true,
        lint,
    }
}

use Cset::{N, X, Y, Z};

const N2: &[Part] = &[part(N, 2, 2, Lint::None)];
const N3: &[Part] = &[part(N, 3, 3, Lint::None)];
const N4: &[Part] = &[part(N, 4, 4, Lint::None)];
const N6: &[Part] = &[part(N, 6, 6, Lint::None)];
const N13: &[Part] = &[part(N, 13, 13, Lint::None)];
const N13_CSUM: &[Part] = &[part(N, 13, 13, Lint::Csum)];
const N14_CSUM: &[Part] = &[part(N, 14, 14, Lint::Csum)];
const N17_CSUM: &[Part] = &[part(N, 17, 17, Lint::Csum)];
const N18_CSUM: &[Part] = &[part(N, 18, 18, Lint::Csum)];
const N6_YYMMD0: &[Part] = &[part(N, 6, 6, Lint::Yymmd0)];
const N6_YYMMDD: &[Part] = &[part(N, 6, 6, Lint::Yymmdd)];
const N1_YESNO: &[Part] = &[part(N, 1, 1, Lint::YesNo)];
const NV4: &[Part] = &[part(N, 1, 4, Lint::None)];
const NV6: &[Part] = &[part(N, 1, 6, Lint::None)];
const NV8: &[Part] = &[part(N, 1, 8, Lint::None)];
const NV10: &[Part] = &[part(N, 1, 10, Lint::None)];
const NV12: &[Part] = &[part(N, 1, 12, Lint::None)];
const NV15: &[Part] = &[part(N, 1, 15, Lint::None)];
const X2: &[Part] = &[part(X, 2, 2, Lint::None)];
const XV2: &[Part] = &[part(X, 1, 2, Lint::None)];
const XV3: &[Part] = &[part(X, 1, 3, Lint::None)];
const XV10: &[Part] = &[part(X, 1, 10, Lint::None)];
const XV12: &[Part] = &[part(X, 1, 12, Lint::None)];
const XV20: &[Part] = &[part(X, 1, 20, Lint::None)];
const XV25: &[Part] = &[part(X, 1, 25, Lint::None)];
const XV28: &[Part] = &[part(X, 1, 28, Lint::None)];
const XV30: &[Part] = &[part(X, 1, 30, Lint::None)];
const XV34: &[Part] = &[part(X, 1, 34, Lint::None)];
const XV35: &[Part] = &[part(X, 1, 35, Lint::None)];
const XV50: &[Part] = &[part(X, 1, 50, Lint::None)];
const XV70: &[Part] = &[part(X, 1, 70, Lint::None)];
const XV90: &[Part] = &[part(X, 1, 90, Lint::None)];
const YV30: &[Part] = &[part(Y, 1, 30, Lint::None)];
const ZV90: &[Part] = &[part(Z, 1, 90, Lint::None)];
const N3_NV15: &[Part] = &[part(N, 3, 3, Lint::None), part(N, 1, 15, Lint::None)];
const N3_XV9: &[Part] = &[part(N, 3, 3, Lint::None), part(X, 1, 9, Lint::None)];
const N3_XV27: &[Part] = &[part(N, 3, 3, Lint::None), part(X, 1, 27, Lint::None)];
const X2_XV28: &[Part] = &[part(X, 2, 2, Lint::None), part(X, 1, 28, Lint::None)];
const N13_CSUM_XV17: &[Part] = &[part(N, 13, 13, Lint::Csum), opt(X, 1, 17, Lint::None)];
const N13_CSUM_NV12: &[Part] = &[part(N, 13, 13, Lint::Csum), opt(N, 1, 12, Lint::None)];
const N10_N10: &[Part] = &[part(N, 10, 10, Lint::None), part(N, 10, 10, Lint::None)];
const DATE0_HHMM: &[Part] = &[part(N, 6, 6, Lint::Yymmd0), part(N, 4, 4, Lint::Hhmm)];
const DATE_HHMM: &[Part] = &[part(N, 6, 6, Lint::Yymmdd), part(N, 4, 4, Lint::Hhmm)];
const DATE_OPTHHMM: &[Part] = &[part(N, 6, 6, Lint::Yymmdd), opt(N, 4, 4, Lint::Hhmm)];
const DATE_OPTDATE: &[Part] = &[part(N, 6, 6, Lint::Yymmdd), opt(N, 6, 6, Lint::Yymmdd)];
const TEMP: &[Part] = &[part(N, 6, 6, Lint::None), opt(X, 1, 1, Lint::Hyphen)];
const UIC_EXT: &[Part] = &[
    part(N, 1, 1, Lint::None),
    part(X, 1, 1, Lint::None),
    part(X, 1, 1, Lint::None),
    part(X, 1, 1, Lint::None),
];
const DIMENSIONS: &[Part] = &[
    part(N, 4, 4, Lint::None),
    part(N, 5, 5, Lint::None),
    part(N, 3, 3, Lint::None),
    part(N, 1, 1, Lint::None),
    part(N, 1, 1, Lint::None),
];
const GRAI: &[Part] = &[
    part(N, 1, 1, Lint::Zero),
    part(N, 13, 13, Lint::Csum),
    opt(X, 1, 16, Lint::None),
];
const ITIP: &[Part] = &[
    part(N, 14, 14, Lint::Csum),
    part(N, 4, 4, Lint::PieceOfTotal),
];
const PROD_TIME: &[Part] = &[part(N, 8, 8, Lint::Yymmddhh), opt(N, 1, 4, Lint::None)];

const fn e(
    first: &'static str,
    last: &'static str,
    predefined: bool,
    parts: &'static [Part],
    title: &'static str,
) -> AiEntry {
    AiEntry {
        first,
        last,
        predefined,
        parts,
        title,
    }
}

/// Predefined-length measure AIs 31nn..36nn: `e` with `predefined = true`, N6.
const fn m(first: &'static str, last: &'static str, title: &'static str) -> AiEntry {
    e(first, last, true, N6, title)
}

/// The AI table, sorted by AI (byte-wise), ranges non-overlapping.
#[cfg(test)]
pub static AI_TABLE: &[AiEntry] = TABLE;

const TABLE: &[AiEntry] = &[
    e("00", "00", true, N18_CSUM, "SSCC"),
    e("01", "01", true, N14_CSUM, "GTIN"),
    e("02", "02", true, N14_CSUM, "CONTENT"),
    e("10", "10", false, XV20, "BATCH/LOT"),
    e("11", "11", true, N6_YYMMD0, "PROD DATE"),
    e("12", "12", true, N6_YYMMD0, "DUE DATE"),
    e("13", "13", true, N6_YYMMD0, "PACK DATE"),
    e("15", "15", true, N6_YYMMD0, "BEST BEFORE or BEST BY"),
    e("16", "16", true, N6_YYMMD0, "SELL BY"),
    e("17", "17", true, N6_YYMMD0, "USE BY or EXPIRY"),
    e("20", "20", true, N2, "VARIANT"),
    e("21", "21", false, XV20, "SERIAL"),
    e("22", "22", false, XV20, "CPV"),
    e("235", "235", false, XV28, "TPX"),
    e("240", "240", false, XV30, "ADDITIONAL ID"),
    e("241", "241", false, XV30, "CUST. PART No."),
    e("242", "242", false, NV6, "MTO VARIANT"),
    e("243", "243", false, XV20, "PCN"),
    e("250", "250", false, XV30, "SECONDARY SERIAL"),
    e("251", "251", false, XV30, "REF. TO SOURCE"),
    e("253", "253", false, N13_CSUM_XV17, "GDTI"),
    e("254", "254", false, XV20, "GLN EXTENSION COMPONENT"),
    e("255", "255", false, N13_CSUM_NV12, "GCN"),
    e("30", "30", false, NV8, "VAR. COUNT"),
    m("3100", "3105", "NET WEIGHT (kg)"),
    m("3110", "3115", "LENGTH (m)"),
    m("3120", "3125", "WIDTH (m)"),
    m("3130", "3135", "HEIGHT (m)"),
    m("3140", "3145", "AREA (m2)"),
    m("3150", "3155", "NET VOLUME (l)"),
    m("3160", "3165", "NET VOLUME (m3)"),
    m("3200", "3205", "NET WEIGHT (lb)"),
    m("3210", "3215", "LENGTH (in)"),
    m("3220", "3225", "LENGTH (ft)"),
    m("3230", "3235", "LENGTH (yd)"),
    m("3240", "3245", "WIDTH (in)"),
    m("3250", "3255", "WIDTH (ft)"),
    m("3260", "3265", "WIDTH (yd)"),
    m("3270", "3275", "HEIGHT (in)"),
    m("3280", "3285", "HEIGHT (ft)"),
    m("3290", "3295", "HEIGHT (yd)"),
    m("3300", "3305", "GROSS WEIGHT (kg)"),
    m("3310", "3315", "LENGTH (m), log"),
    m("3320", "3325", "WIDTH (m), log"),
    m("3330", "3335", "HEIGHT (m), log"),
    m("3340", "3345", "AREA (m2), log"),
    m("3350", "3355", "VOLUME (l), log"),
    m("3360", "3365", "VOLUME (m3), log"),
    m("3370", "3375", "KG PER m2"),
    m("3400", "3405", "GROSS WEIGHT (lb)"),
    m("3410", "3415", "LENGTH (in), log"),
    m("3420", "3425", "LENGTH (ft), log"),
    m("3430", "3435", "LENGTH (yd), log"),
    m("3440", "3445", "WIDTH (in), log"),
    m("3450", "3455", "WIDTH (ft), log"),
    m("3460", "3465", "WIDTH (yd), log"),
    m("3470", "3475", "HEIGHT (in), log"),
    m("3480", "3485", "HEIGHT (ft), log"),
    m("3490", "3495", "HEIGHT (yd), log"),
    m("3500", "3505", "AREA (in2)"),
    m("3510", "3515", "AREA (ft2)"),
    m("3520", "3525", "AREA (yd2)"),
    m("3530", "3535", "AREA (in2), log"),
    m("3540", "3545", "AREA (ft2), log"),
    m("3550", "3555", "AREA (yd2), log"),
    m("3560", "3565", "NET WEIGHT (t oz)"),
    m("3570", "3575", "NET VOLUME (oz)"),
    m("3600", "3605", "NET VOLUME (qt)"),
    m("3610", "3615", "NET VOLUME (gal.)"),
    m("3620", "3625", "VOLUME (qt), log"),
    m("3630", "3635", "VOLUME (gal.), log"),
    m("3640", "3645", "VOLUME (in3)"),
    m("3650", "3655", "VOLUME (ft3)"),
    m("3660", "3665", "VOLUME (yd3)"),
    m("3670", "3675", "VOLUME (in3), log"),
    m("3680", "3685", "VOLUME (ft3), log"),
    m("3690", "3695", "VOLUME (yd3), log"),
    e("37", "37", false, NV8, "COUNT"),
    e("3900", "3909", false, NV15, "AMOUNT"),
    e("3910", "3919", false, N3_NV15, "AMOUNT"),
    e("3920", "3929", false, NV15, "PRICE"),
    e("3930", "3939", false, N3_NV15, "PRICE"),
    e("3940", "3943", false, N4, "PRCNT OFF"),
    e("3950", "3955", false, N6, "PRICE/UoM"),
    e("400", "400", false, XV30, "ORDER NUMBER"),
    e("401", "401", false, XV30, "GINC"),
    e("402", "402", false, N17_CSUM, "GSIN"),
    e("403", "403", false, XV30, "ROUTE"),
    e("410", "410", true, N13_CSUM, "SHIP TO LOC"),
    e("411", "411", true, N13_CSUM, "BILL TO"),
    e("412", "412", true, N13_CSUM, "PURCHASE FROM"),
    e("413", "413", true, N13_CSUM, "SHIP FOR LOC"),
    e("414", "414", true, N13_CSUM, "LOC No."),
    e("415", "415", true, N13_CSUM, "PAY TO"),
    e("416", "416", true, N13_CSUM, "PROD/SERV LOC"),
    e("417", "417", true, N13_CSUM, "PARTY"),
    e("420", "420", false, XV20, "SHIP TO POST"),
    e("421", "421", false, N3_XV9, "SHIP TO POST"),
    e("422", "422", false, N3, "ORIGIN"),
    e("423", "423", false, NV15, "COUNTRY - INITIAL PROCESS"),
    e("424", "424", false, N3, "COUNTRY - PROCESS"),
    e("425", "425", false, NV15, "COUNTRY - DISASSEMBLY"),
    e("426", "426", false, N3, "COUNTRY - FULL PROCESS"),
    e("427", "427", false, XV3, "ORIGIN SUBDIVISION"),
    e("4300", "4301", false, XV35, "SHIP TO COMP / NAME"),
    e("4302", "4306", false, XV70, "SHIP TO ADDRESS"),
    e("4307", "4307", false, X2, "SHIP TO COUNTRY"),
    e("4308", "4308", false, XV30, "SHIP TO PHONE"),
    e("4309", "4309", false, N10_N10, "SHIP TO GEO"),
    e("4310", "4311", false, XV35, "RTN TO COMP / NAME"),
    e("4312", "4316", false, XV70, "RTN TO ADDRESS"),
    e("4317", "4317", false, X2, "RTN TO COUNTRY"),
    e("4318", "4318", false, XV20, "RTN TO POST"),
    e("4319", "4319", false, XV30, "RTN TO PHONE"),
    e("4320", "4320", false, XV35, "SRV DESCRIPTION"),
    e(
        "4321",
        "4323",
        false,
        N1_YESNO,
        "DANGEROUS GOODS / AUTH TO LEAVE / SIG REQUIRED",
    ),
    e(
        "4324",
        "4325",
        false,
        DATE0_HHMM,
        "NOT BEF / NOT AFT DEL DT",
    ),
    e("4326", "4326", false, N6_YYMMDD, "REL DATE"),
    e("4330", "4333", false, TEMP, "MAX / MIN TEMP"),
    e("7001", "7001", false, N13, "NSN"),
    e("7002", "7002", false, XV30, "MEAT CUT"),
    e("7003", "7003", false, DATE_HHMM, "EXPIRY TIME"),
    e("7004", "7004", false, NV4, "ACTIVE POTENCY"),
    e("7005", "7005", false, XV12, "CATCH AREA"),
    e("7006", "7006", false, N6_YYMMDD, "FIRST FREEZE DATE"),
    e("7007", "7007", false, DATE_OPTDATE, "HARVEST DATE"),
    e("7008", "7008", false, XV3, "AQUATIC SPECIES"),
    e("7009", "7009", false, XV10, "FISHING GEAR TYPE"),
    e("7010", "7010", false, XV2, "PROD METHOD"),
    e("7011", "7011", false, DATE_OPTHHMM, "TEST BY DATE"),
    e(
        "7020",
        "7022",
        false,
        XV20,
        "REFURB LOT / FUNC STAT / REV STAT",
    ),
    e("7023", "7023", false, XV30, "GIAI - ASSEMBLY"),
    e("7030", "7039", false, N3_XV27, "PROCESSOR # s"),
    e("7040", "7040", false, UIC_EXT, "UIC+EXT"),
    e(
        "710",
        "715",
        false,
        XV20,
        "NHRN (PZN, CIP, CN, DRN, AIM, NDC)",
    ),
    e("7230", "7239", false, X2_XV28, "CERT # s"),
    e("7240", "7240", false, XV20, "PROTOCOL"),
    e("7241", "7241", false, N2, "AIDC MEDIA TYPE"),
    e("7242", "7242", false, XV25, "VCN"),
    e("8001", "8001", false, DIMENSIONS, "DIMENSIONS"),
    e("8002", "8002", false, XV20, "CMT No."),
    e("8003", "8003", false, GRAI, "GRAI"),
    e("8004", "8004", false, XV30, "GIAI"),
    e("8005", "8005", false, N6, "PRICE PER UNIT"),
    e("8006", "8006", false, ITIP, "ITIP"),
    e("8007", "8007", false, XV34, "IBAN"),
    e("8008", "8008", false, PROD_TIME, "PROD TIME"),
    e("8009", "8009", false, XV50, "OPTSEN"),
    e("8010", "8010", false, YV30, "CPID"),
    e("8011", "8011", false, NV12, "CPID SERIAL"),
    e("8012", "8012", false, XV20, "VERSION"),
    e("8013", "8013", false, XV25, "GMN"),
    e("8017", "8018", false, N18_CSUM, "GSRN"),
    e("8019", "8019", false, NV10, "SRIN"),
    e("8020", "8020", false, XV25, "REF No."),
    e("8026", "8026", false, ITIP, "ITIP CONTENT"),
    e("8030", "8030", false, ZV90, "DIGSIG"),
    e("8110", "8110", false, XV70, "COUPON"),
    e("8111", "8111", false, N4, "POINTS"),
    e("8112", "8112", false, XV70, "COUPON (paperless)"),
    e("8200", "8200", false, XV70, "PRODUCT URL"),
    e("90", "90", false, XV30, "INTERNAL"),
    e("91", "99", false, XV90, "INTERNAL"),
];

const fn build_prefix_len() -> [u8; 100] {
    let mut out = [0u8; 100];
    let mut i = 0;
    while i < TABLE.len() {
        let first = TABLE[i].first.as_bytes();
        let last = TABLE[i].last.as_bytes();
        let mut p = (first[0] - b'0') as usize * 10 + (first[1] - b'0') as usize;
        let q = (last[0] - b'0') as usize * 10 + (last[1] - b'0') as usize;
        while p <= q {
            out[p] = first.len() as u8;
            p += 1;
        }
        i += 1;
    }
    out
}

static PREFIX_LEN: [u8; 100] = build_prefix_len();

/// Length (2, 3 or 4) of every AI starting with the two digits `prefix`
/// (0..=99), or 0 if no AI starts with them.
pub fn ai_len_by_prefix(prefix: usize) -> usize {
    PREFIX_LEN.get(prefix).copied().unwrap_or(0) as usize
}

/// Numeric value of up to four ASCII digits (const-friendly).
const fn digits_value(d: &[u8]) -> usize {
    let mut v = 0usize;
    let mut i = 0;
    while i < d.len() {
        v = v * 10 + (d[i] - b'0') as usize;
        i += 1;
    }
    v
}

/// Slot of an AI in [`INDEX`]: 2-digit AIs at 0..100, 3-digit at 100..1100,
/// 4-digit at 1100..11100.
const fn slot(len: usize, value: usize) -> usize {
    match len {
        2 => value,
        3 => 100 + value,
        _ => 1100 + value,
    }
}

const NO_ENTRY: u8 = u8::MAX;

const fn build_index() -> [u8; 11100] {
    assert!(TABLE.len() < NO_ENTRY as usize);
    let mut out = [NO_ENTRY; 11100];
    let mut i = 0;
    while i < TABLE.len() {
        let first = TABLE[i].first.as_bytes();
        let len = first.len();
        let mut v = digits_value(first);
        let last = digits_value(TABLE[i].last.as_bytes());
        while v <= last {
            out[slot(len, v)] = i as u8;
            v += 1;
        }
        i += 1;
    }
    out
}

/// Entry index for every possible 2-, 3- and 4-digit AI (built at compile
/// time, so a lookup is one array read).
static INDEX: [u8; 11100] = build_index();

/// [`lookup`] and [`ai_text`] in one step for `ai` (2-4 ASCII digits, cut to
/// the length given by [`ai_len_by_prefix`]): the digits are read once.
#[inline]
pub fn lookup_with_text(ai: &[u8]) -> Option<(&'static AiEntry, &'static str)> {
    let len = ai.len();
    if !(2..=4).contains(&len) {
        return None;
    }
    let mut v = 0usize;
    let mut bad = false;
    for &c in ai {
        let d = c.wrapping_sub(b'0');
        bad |= d > 9;
        v = v * 10 + d as usize;
    }
    if bad {
        return None;
    }
    let idx = INDEX[slot(len, v)];
    let entry = TABLE.get(idx as usize)?; // NO_ENTRY is past the end
    let v4 = v * if len == 2 {
        100
    } else if len == 3 {
        10
    } else {
        1
    };
    Some((entry, AI_TEXT.get(4 * v4..4 * v4 + len)?))
}

/// Look up the entry for the AI `ai` (2-4 ASCII digits, already cut to the
/// length given by [`ai_len_by_prefix`]).
pub fn lookup(ai: &[u8]) -> Option<&'static AiEntry> {
    if !(2..=4).contains(&ai.len()) || !ai.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let idx = INDEX[slot(ai.len(), digits_value(ai))];
    if idx == NO_ENTRY {
        None
    } else {
        TABLE.get(idx as usize)
    }
}

/// Every 4-digit string `0000`..`9999` back to back, built at compile time:
/// AI text is sliced out of it so that [`super::Element::ai`] is a
/// `&'static str` and costs no allocation.
const fn build_ai_text() -> [u8; 40000] {
    let mut out = [0u8; 40000];
    let mut v = 0;
    while v < 10000 {
        out[4 * v] = b'0' + (v / 1000) as u8;
        out[4 * v + 1] = b'0' + (v / 100 % 10) as u8;
        out[4 * v + 2] = b'0' + (v / 10 % 10) as u8;
        out[4 * v + 3] = b'0' + (v % 10) as u8;
        v += 1;
    }
    out
}

static AI_TEXT_BYTES: [u8; 40000] = build_ai_text();

static AI_TEXT: &str = match std::str::from_utf8(&AI_TEXT_BYTES) {
    Ok(s) => s,
    Err(_) => panic!("AI text is ASCII digits"),
};

/// The AI digits `ai` (2-4 ASCII digits) as a `&'static str`, without
/// allocating; `None` for anything else.
#[inline]
pub fn ai_text(ai: &[u8]) -> Option<&'static str> {
    if !(2..=4).contains(&ai.len()) || !ai.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // "253" is the first three characters of "2530", "01" of "0100".
    let v = digits_value(ai)
        * match ai.len() {
            2 => 100,
            3 => 10,
            _ => 1,
        };
    AI_TEXT.get(4 * v..4 * v + ai.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ai_text_is_the_digits() {
        for ai in [
            "00", "01", "10", "17", "21", "99", "235", "253", "7003", "8006", "0000", "9999",
        ] {
            assert_eq!(ai_text(ai.as_bytes()), Some(ai));
        }
        for bad in ["", "1", "12345", "1a", "ab"] {
            assert_eq!(ai_text(bad.as_bytes()), None);
        }
    }

    #[test]
    fn table_is_sorted_and_non_overlapping() {
        for w in AI_TABLE.windows(2) {
            assert!(w[0].first <= w[0].last, "{}", w[0].first);
            assert!(w[0].last < w[1].first, "{} / {}", w[0].last, w[1].first);
            assert_eq!(w[0].first.len(), w[0].last.len());
        }
    }

    #[test]
    fn prefix_lengths_match_table() {
        for en in AI_TABLE {
            let b = en.first.as_bytes();
            let p = (b[0] - b'0') as usize * 10 + (b[1] - b'0') as usize;
            assert_eq!(ai_len_by_prefix(p), en.first.len(), "AI {}", en.first);
        }
        // Every prefix with a length has at least one AI in the table.
        for p in 0..100 {
            if ai_len_by_prefix(p) != 0 {
                let pre = |s: &str| s[..2].parse::<usize>().unwrap();
                assert!(
                    AI_TABLE
                        .iter()
                        .any(|en| pre(en.first) <= p && p <= pre(en.last)),
                    "prefix {p:02}"
                );
            }
        }
        assert_eq!(ai_len_by_prefix(23), 3);
        assert_eq!(ai_len_by_prefix(31), 4);
        assert_eq!(ai_len_by_prefix(41), 3);
        assert_eq!(ai_len_by_prefix(71), 3);
        assert_eq!(ai_len_by_prefix(89), 0);
        assert_eq!(ai_len_by_prefix(99), 2);
        assert_eq!(ai_len_by_prefix(92), 2);
        assert_eq!(ai_len_by_prefix(3), 0);
    }

    /// §5.2: predefined-length prefixes and their value lengths.
    #[test]
    fn predefined_lengths_match_gs1_prefix_table() {
        let fixed = |p: usize| -> Option<usize> {
            match p {
                0 => Some(18),
                1..=3 => Some(14),
                4 => Some(16),
                11..=19 => Some(6),
                20 => Some(2),
                31..=36 => Some(6),
                41 => Some(13),
                _ => None,
            }
        };
        for en in AI_TABLE {
            let b = en.first.as_bytes();
            let p = (b[0] - b'0') as usize * 10 + (b[1] - b'0') as usize;
            assert_eq!(en.predefined, fixed(p).is_some(), "AI {}", en.first);
            if let Some(len) = fixed(p) {
                assert_eq!(en.min_len(), len, "AI {}", en.first);
                assert_eq!(en.max_len(), len, "AI {}", en.first);
            }
        }
    }

    #[test]
    fn lookup_finds_singles_and_ranges() {
        assert_eq!(lookup(b"01").unwrap().title, "GTIN");
        assert_eq!(lookup(b"3103").unwrap().title, "NET WEIGHT (kg)");
        assert!(lookup(b"3106").is_none());
        assert_eq!(lookup(b"715").unwrap().first, "710");
        assert!(lookup(b"716").is_none());
        assert_eq!(lookup(b"95").unwrap().first, "91");
        assert!(lookup(b"14").is_none());
        assert!(lookup(b"89").is_none());
        assert!(lookup(b"8014").is_none());
        assert_eq!(lookup(b"8018").unwrap().first, "8017");
        assert!(lookup(b"1").is_none());
        assert!(lookup(b"12345").is_none());
        assert!(lookup(b"0A").is_none());
        // Every table AI resolves to its own entry.
        for en in AI_TABLE {
            let lo: usize = en.first.parse().unwrap();
            let hi: usize = en.last.parse().unwrap();
            for v in lo..=hi {
                let ai = format!("{v:0w$}", w = en.first.len());
                assert_eq!(lookup(ai.as_bytes()), Some(en), "AI {ai}");
            }
        }
    }

    #[test]
    fn brief_ais_present() {
        for ai in [
            "00", "01", "02", "10", "11", "12", "13", "15", "16", "17", "20", "21", "22", "235",
            "240", "241", "242", "250", "251", "30", "37", "3900", "3909", "400", "410", "417",
            "422", "7003", "710", "715", "8003", "8004", "8006", "90", "91", "99", "3100", "3695",
        ] {
            assert!(lookup(ai.as_bytes()).is_some(), "AI {ai}");
        }
    }
}
