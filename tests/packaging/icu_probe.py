"""Everything Qt6Core asks ICU, printed one repr() per line (run as a script).

tests/packaging/test_icu_data.py runs it twice, once with PySide6's own libicudata and once
with packaging/icudata.py's trimmed one preloaded (LD_PRELOAD: the loader then satisfies
Qt6Core's NEEDED libicudata.so.NN with it), and wants the same lines. It reaches the four
ICU services Qt6Core imports: collation (QCollator, case and numeric modes, locales with
their own tailorings), case mapping (QLocale::toUpper / toLower, Turkish and Lithuanian
rules), time-zone display names (every QTimeZone name type in each locale) and converters
(QStringDecoder by name, the codec list, and an HTML clipboard payload decoded by its
meta charset). Qt's warnings are printed too: a collator ICU cannot open warns.
"""

from __future__ import annotations

from PySide6.QtCore import (
    QCollator,
    QDateTime,
    QLocale,
    QMimeData,
    QStringConverter,
    QStringDecoder,
    QTimeZone,
    qInstallMessageHandler,
)

WORDS = [
    "Äpfel", "apple", "Zebra", "zebra", "ähnlich", "file10", "file9", "çay", "ıspanak", "İstanbul", "straße",
    "Strasse", "東京", "大阪", "Ω", "ω", "ñandú", "nube", "ch", "cz", "å", "z", "i̇̀",
]  # fmt: skip
LOCALES = [
    "C", "en_US", "de_DE", "sv_SE", "tr_TR", "ja_JP", "zh_CN", "ar_EG", "he_IL", "ru_RU", "hi_IN", "th_TH",
    "fr_FR", "es_ES", "cs_CZ", "da_DK", "lt_LT", "el_GR",
]  # fmt: skip
ZONES = [
    b"Europe/Berlin", b"America/New_York", b"Asia/Kolkata", b"Australia/Lord_Howe", b"UTC", b"Asia/Tokyo",
    b"America/Sao_Paulo", b"Africa/Cairo", b"Pacific/Chatham",
]  # fmt: skip
ENCODED = {
    "windows-1252": bytes(range(0x80, 0x100)),
    "Shift_JIS": "東京タワー".encode("shift_jis"),
    "GB18030": "中文".encode("gb18030"),
    "KOI8-R": "привет".encode("koi8_r"),
    "ISO-8859-15": b"\xa4\xe9",
    "EUC-KR": "한국어".encode("euc_kr"),
    "Big5": "臺灣".encode("big5"),
    "IBM037": "hello".encode("cp037"),
    "ISO-2022-JP": "日本".encode("iso2022_jp"),
}
WHEN = 1780000000  # any instant: 2026-05-28 UTC, summer in the north, winter in the south


def main() -> None:
    messages: list[str] = []
    qInstallMessageHandler(lambda _kind, _context, text: messages.append(text))
    rows: list[object] = []
    when = QDateTime.fromSecsSinceEpoch(WHEN)
    types = (QTimeZone.TimeType.StandardTime, QTimeZone.TimeType.DaylightTime, QTimeZone.TimeType.GenericTime)
    names = (
        QTimeZone.NameType.DefaultName, QTimeZone.NameType.LongName, QTimeZone.NameType.ShortName,
        QTimeZone.NameType.OffsetName,
    )  # fmt: skip
    for name in LOCALES:
        locale = QLocale(name)
        for numeric in (False, True):
            for case in (False, True):
                collator = QCollator(locale)
                collator.setNumericMode(numeric)
                collator.setIgnorePunctuation(case)
                rows.append((name, numeric, case, [collator.compare(a, b) for a in WORDS for b in WORDS]))
        rows.append((name, locale.toUpper(" ".join(WORDS)), locale.toLower(" ".join(WORDS))))
        for zone in ZONES:
            tz = QTimeZone(zone)
            rows.append((name, zone, [tz.displayName(t, n, locale) for t in types for n in names]))
            rows.append((name, zone, tz.displayName(when, QTimeZone.NameType.LongName, locale), tz.comment()))
    for encoding, data in ENCODED.items():
        decoder = QStringDecoder(encoding)
        mime = QMimeData()
        html = b'<html><head><meta charset="' + encoding.encode() + b'"></head><body>' + data + b"</body></html>"
        mime.setData("text/html", html)
        rows.append((encoding, decoder.isValid(), decoder.name(), mime.html()))
    rows.append(("codecs", QStringConverter.availableCodecs()))
    rows.append(("messages", messages))
    for row in rows:
        print(repr(row))


if __name__ == "__main__":
    main()
