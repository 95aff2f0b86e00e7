"""Deterministic generator of the AWS Redshift TICKIT sample data set (:func:`generate_tickit`).

The tables (columns, types, keys, row counts) are described in :mod:`~.tickit_tables`.

Example:
    >>> from helpers.sources.sample.tickit import generate_tickit
    >>> from helpers.sources.sample.tickit_tables import expected_row_counts
    >>> tables = generate_tickit(scale=0.01, seed=1)
    >>> {name: t.num_rows for name, t in tables.items()} == expected_row_counts(0.01)
    True
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from helpers.sources.sample.tickit_tables import LIKE_COLUMNS, TABLE_NAMES, arrow_schema, expected_row_counts

__all__ = ["COMMISSION_RATE", "decimal_from_cents", "generate_tickit"]

_I64 = npt.NDArray[np.int64]

COMMISSION_RATE = Decimal("0.15")
"""TICKIT's commission: ``commission`` is exactly this share of ``pricepaid``."""

# --------------------------------------------------------------------------------------------
# reference data

_FIRST_DATEID = 1827  # TICKIT's dateid of 2008-01-01
_YEAR_START = dt.date(2008, 1, 1)
_DAYS = 365
_EPOCH_DAY_2008 = (_YEAR_START - dt.date(1970, 1, 1)).days
_SECONDS_PER_DAY = 86_400
_YEAR_START_S = _EPOCH_DAY_2008 * _SECONDS_PER_DAY

_CATEGORIES = (
    (1, "Sports", "MLB", "Major League Baseball"),
    (2, "Sports", "NHL", "National Hockey League"),
    (3, "Sports", "NFL", "National Football League"),
    (4, "Sports", "NBA", "National Basketball Association"),
    (5, "Sports", "MLS", "Major League Soccer"),
    (6, "Shows", "Musicals", "Musical theatre"),
    (7, "Shows", "Plays", "All non-musical theatre"),
    (8, "Shows", "Opera", "All opera and light opera"),
    (9, "Concerts", "Pop", "All rock and pop music concerts"),
    (10, "Concerts", "Jazz", "All jazz singers and bands"),
    (11, "Concerts", "Classical", "All symphony, concerto, and choir concerts"),
)
# share of events per category (TICKIT has mostly shows and concerts)
_CATEGORY_WEIGHTS = np.array([0.02, 0.02, 0.02, 0.02, 0.02, 0.18, 0.2, 0.1, 0.3, 0.06, 0.08])
# median ticket price in dollars per category
_CATEGORY_MEDIAN_PRICE = np.array([60, 80, 120, 90, 40, 140, 90, 180, 110, 70, 85], dtype=np.float64)

_US_HOLIDAYS_2008 = (
    dt.date(2008, 1, 1),
    dt.date(2008, 1, 21),
    dt.date(2008, 2, 18),
    dt.date(2008, 5, 26),
    dt.date(2008, 7, 4),
    dt.date(2008, 9, 1),
    dt.date(2008, 10, 13),
    dt.date(2008, 11, 11),
    dt.date(2008, 11, 27),
    dt.date(2008, 12, 25),
)
_DAY_NAMES = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")

_FIRST_NAMES = (
    "Aaron", "Abigail", "Adam", "Alana", "Amber", "Barry", "Beatrice", "Blake", "Brenda", "Caleb",
    "Carla", "Chester", "Chloe", "Dalton", "Daria", "Derek", "Dora", "Elijah", "Elaine", "Emery",
    "Fiona", "Fletcher", "Gavin", "Gemma", "Hadley", "Harper", "Hector", "Ingrid", "Isaac", "Jada",
    "Jasper", "Joelle", "Kameko", "Keegan", "Kirsten", "Lars", "Leila", "Lionel", "Madonna", "Malik",
    "Maya", "Nash", "Nola", "Olga", "Orson", "Paki", "Quemby", "Rafael", "Rhona", "Salvador",
    "Sybil", "Tatum", "Ulric", "Vera", "Wade", "Whilemina", "Xavier", "Yetta", "Zahir", "Zena",
)  # fmt: skip
_LAST_NAMES = (
    "Abbott", "Acevedo", "Baird", "Barton", "Bender", "Carver", "Castillo", "Dalton", "Dillard",
    "Ellison", "Emerson", "Fitzgerald", "Frost", "Galloway", "Gentry", "Hampton", "Hines", "Ingram",
    "Jacobson", "Joyner", "Keller", "Kirkland", "Lancaster", "Lowe", "Macdonald", "Mayer", "Nolan",
    "Norris", "O'Neill", "Osborn", "Pace", "Pittman", "Quinn", "Rasmussen", "Rowland", "Salas",
    "Sheppard", "Tanner", "Trujillo", "Underwood", "Valenzuela", "Vaughn", "Walsh", "Whitley",
    "Xiong", "York", "Zamora", "Zimmerman", "D'Angelo", "Stout",
)  # fmt: skip
_CITIES = (
    ("New York", "NY"), ("Los Angeles", "CA"), ("Chicago", "IL"), ("Houston", "TX"),
    ("Phoenix", "AZ"), ("Philadelphia", "PA"), ("San Antonio", "TX"), ("San Diego", "CA"),
    ("Dallas", "TX"), ("San Jose", "CA"), ("Austin", "TX"), ("Jacksonville", "FL"),
    ("Columbus", "OH"), ("Charlotte", "NC"), ("Indianapolis", "IN"), ("San Francisco", "CA"),
    ("Seattle", "WA"), ("Denver", "CO"), ("Washington", "DC"), ("Boston", "MA"), ("Nashville", "TN"),
    ("Detroit", "MI"), ("Portland", "OR"), ("Las Vegas", "NV"), ("Memphis", "TN"),
    ("Louisville", "KY"), ("Baltimore", "MD"), ("Milwaukee", "WI"), ("Albuquerque", "NM"),
    ("Tucson", "AZ"), ("Fresno", "CA"), ("Sacramento", "CA"), ("Kansas City", "MO"),
    ("Atlanta", "GA"), ("Miami", "FL"), ("Raleigh", "NC"), ("Omaha", "NE"), ("Minneapolis", "MN"),
    ("Tulsa", "OK"), ("Cleveland", "OH"), ("New Orleans", "LA"), ("Tampa", "FL"),
    ("Pittsburgh", "PA"), ("Cincinnati", "OH"), ("St. Louis", "MO"), ("Orlando", "FL"),
    ("Salt Lake City", "UT"), ("Honolulu", "HI"), ("Anchorage", "AK"), ("Buffalo", "NY"),
)  # fmt: skip
_VENUE_KINDS = (
    "Stadium", "Arena", "Theatre", "Center", "Hall", "Field", "Amphitheatre", "Coliseum", "Park",
    "Opera House",
)  # fmt: skip
_VENUE_PREFIXES = (
    "Memorial", "Civic", "Municipal", "Grand", "Royal", "Union", "Liberty", "Pioneer", "Harbor",
    "Lakeside", "Riverside", "Heritage", "Majestic", "Orpheum", "Paramount", "Sovereign",
)  # fmt: skip
_EVENT_NAMES: dict[int, tuple[str, ...]] = {
    1: ("Red Sox vs Yankees", "Cubs vs Cardinals", "Giants vs Dodgers", "Mets vs Phillies"),
    2: ("Bruins vs Canadiens", "Rangers vs Flyers", "Red Wings vs Blackhawks"),
    3: ("Patriots vs Jets", "Packers vs Bears", "Cowboys vs Eagles", "Steelers vs Ravens"),
    4: ("Lakers vs Celtics", "Bulls vs Knicks", "Spurs vs Suns", "Heat vs Magic"),
    5: ("Galaxy vs Fire", "Revolution vs Red Bulls", "Crew vs Dynamo"),
    6: ("Mamma Mia!", "Wicked", "The Lion King", "Jersey Boys", "Chicago", "Hairspray", "Rent",
        "Spring Awakening", "Grease", "A Chorus Line", "Shrek the Musical", "Legally Blonde"),
    7: ("August: Osage County", "Macbeth", "The Seagull", "Equus", "Boeing-Boeing", "Hamlet",
        "Our Town", "Death of a Salesman", "The 39 Steps", "Twelfth Night"),
    8: ("La Boheme", "Carmen", "Tosca", "The Magic Flute", "Madama Butterfly", "Aida",
        "Don Giovanni", "Il Trovatore", "The Mikado", "Rigoletto"),
    9: ("The Killers", "Coldplay", "Radiohead", "Foo Fighters", "Bon Jovi", "Kanye West",
        "Rihanna", "Bruce Springsteen", "Madonna", "R.E.M.", "Linkin Park", "Duffy", "Vampire Weekend",
        "Death Cab for Cutie", "The Police", "Kid Rock", "Alicia Keys", "Dierks Bentley"),
    10: ("Diana Krall", "Wynton Marsalis", "Herbie Hancock", "Cassandra Wilson", "Chick Corea",
         "Pat Metheny", "Dave Brubeck", "Esperanza Spalding"),
    11: ("Beethoven Symphony No. 9", "Mahler Symphony No. 2", "Bach Mass in B minor",
         "Handel Messiah", "Mozart Requiem", "Brahms Piano Concerto No. 1", "Verdi Requiem"),
}  # fmt: skip
_START_SECONDS = np.array([14 * 3600 + 1800, 15 * 3600, 19 * 3600, 19 * 3600 + 1800, 20 * 3600])
_START_WEIGHTS = np.array([0.12, 0.08, 0.3, 0.3, 0.2])
_DOMAINS = np.array(["example.com", "example.org", "example.net", "mail.example", "tickit.example"])


def decimal_from_cents(cents: npt.ArrayLike, precision: int = 8, scale: int = 2) -> pa.Array:
    """Build an exact ``decimal128(precision, scale)`` array from integer minor units.

    The 128-bit two's-complement values are written straight into the Arrow buffer, so no
    float is ever involved: ``decimal_from_cents([12345])`` holds ``Decimal("123.45")``.

    Args:
        cents: integers, the value times ``10**scale``.
        precision: decimal precision of the result.
        scale: decimal scale of the result.

    Returns:
        A ``pyarrow.Decimal128Array`` without nulls.

    Raises:
        ValueError: if a value does not fit ``precision`` digits.
    """
    values = np.ascontiguousarray(cents, dtype=np.int64)
    if values.size and int(np.abs(values).max()) >= 10**precision:
        raise ValueError(
            f"Failed to build decimal({precision},{scale}) values: {int(np.abs(values).max())} "
            f"minor units need more than {precision} digits"
        )
    words = np.empty((values.size, 2), dtype="<i8")
    words[:, 0] = values
    words[:, 1] = values >> 63  # sign extension into the high word
    return pa.Array.from_buffers(
        pa.decimal128(precision, scale), values.size, [None, pa.py_buffer(words.tobytes())]
    )


def generate_tickit(scale: float = 1.0, seed: int = 20080101) -> dict[str, pa.Table]:
    """Generate the seven TICKIT tables.

    ``category`` (11 rows) and ``date`` (the 365 days from 2008-01-01; 2008 is a leap year, so
    the last day is 2008-12-30 as in the original data) stay whole at every scale. Guaranteed
    (and checked by the unit tests):

    * the row counts equal :func:`~helpers.sources.sample.tickit_tables.expected_row_counts`;
    * the same ``seed`` and ``scale`` give the same tables; another seed gives other data;
    * every foreign key points at an existing row: an event's venue, category and date; a
      listing's seller, event and list date; a sale's listing, and the sale's seller, event
      equal its listing's; the buyer is an existing user other than the seller;
    * the tickets sold over all sales of a listing never exceed its ``numtickets``;
    * list time < sale time < event start, all in 2008, and each ``dateid`` is the date of the
      row's own timestamp (event start, list time, sale time);
    * money is exact: ``priceperticket`` is whole dollars, ``totalprice = numtickets *
      priceperticket``, ``pricepaid = qtysold * priceperticket`` and ``commission`` is exactly
      :data:`COMMISSION_RATE` of ``pricepaid``; all are ``decimal128(8, 2)`` built from integer
      cents (never floats).

    Args:
        scale: 1.0 for the documented row counts; smaller values shrink the fact and user tables
            (see ``expected_row_counts``).
        seed: seed of the ``numpy.random.Generator``; the same seed and scale give equal tables.

    Returns:
        Table name (``TABLE_NAMES``, dependency order) -> ``pyarrow.Table`` with the schema
        ``arrow_schema`` gives, sorted by primary key.

    Raises:
        ValueError: if ``scale`` is not positive.

    Example:
        >>> tables = generate_tickit(0.001, seed=3)
        >>> tables["sale"].schema.field("pricepaid").type
        Decimal128Type(decimal128(8, 2))
    """
    counts = expected_row_counts(scale)

    def rng(table: str) -> np.random.Generator:
        # one stream per table: adding a column to one table does not reshuffle the others
        return np.random.default_rng([seed, TABLE_NAMES.index(table)])

    tables: dict[str, pa.Table] = {}
    tables["category"] = _category()
    tables["date"] = _date()
    tables["venue"] = _venue(rng("venue"), counts["venue"])
    tables["users"] = _users(rng("users"), counts["users"])
    tables["event"], event_cat, event_start = _event(rng("event"), counts["event"], counts["venue"])
    listing_cols = _listing_columns(
        rng("listing"), counts["listing"], counts["users"], event_cat, event_start
    )
    tables["listing"] = _listing_table(listing_cols)
    tables["sale"] = _sale_table(rng("sale"), counts["sale"], counts["users"], listing_cols, event_start)
    for name, table in tables.items():
        assert table.num_rows == counts[name], (name, table.num_rows, counts[name])
    return tables


# --------------------------------------------------------------------------------------------
# tables


_ColumnData: TypeAlias = pa.Array | npt.NDArray[Any] | list[Any]


def _table(name: str, columns: dict[str, _ColumnData]) -> pa.Table:
    schema = arrow_schema(name)
    arrays = []
    for field in schema:
        data = columns[field.name]
        arrays.append(data.cast(field.type) if isinstance(data, pa.Array) else pa.array(data, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _category() -> pa.Table:
    return _table(
        "category",
        {
            "catid": [c[0] for c in _CATEGORIES],
            "catgroup": [c[1] for c in _CATEGORIES],
            "catname": [c[2] for c in _CATEGORIES],
            "catdesc": [c[3] for c in _CATEGORIES],
        },
    )


def _date() -> pa.Table:
    offsets = np.arange(_DAYS)
    days = [_YEAR_START + dt.timedelta(days=int(i)) for i in offsets]
    jan1_weekday_sunday_based = (_YEAR_START.weekday() + 1) % 7  # Sunday = 0
    holidays = set(_US_HOLIDAYS_2008)
    return _table(
        "date",
        {
            "dateid": offsets + _FIRST_DATEID,
            "caldate": days,
            "day": [_DAY_NAMES[d.weekday()] for d in days],
            "week": (offsets + jan1_weekday_sunday_based) // 7 + 1,
            "month": [_MONTH_NAMES[d.month - 1] for d in days],
            "qtr": [str((d.month - 1) // 3 + 1) for d in days],
            "year": np.full(_DAYS, 2008),
            "holiday": [d in holidays for d in days],
        },
    )


def _pick(rng: np.random.Generator, pool: tuple[str, ...] | npt.NDArray[np.str_], n: int) -> pa.Array:
    return pa.array(np.asarray(pool, dtype=object)[rng.integers(0, len(pool), n)], type=pa.string())


def _users(rng: np.random.Generator, n: int) -> pa.Table:
    alphabet = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", dtype="S1")
    usernames = alphabet[rng.integers(0, 36, (n, 8))].view("S8").ravel()
    first = _pick(rng, _FIRST_NAMES, n)
    last = _pick(rng, _LAST_NAMES, n)
    city_idx = rng.integers(0, len(_CITIES), n)
    cities = np.array([c[0] for c in _CITIES], dtype=object)[city_idx]
    states = np.array([c[1] for c in _CITIES], dtype=object)[city_idx]
    # phone "(NNN) NNN-NNNN": fill the digit positions of a 14-byte template
    template = np.frombuffer(b"(000) 000-0000", dtype=np.uint8)
    phones = np.tile(template, (n, 1))
    digit_pos = [1, 2, 3, 6, 7, 8, 10, 11, 12, 13]
    phones[:, digit_pos] = rng.integers(0, 10, (n, 10)) + ord("0")
    phones[:, 1] = rng.integers(2, 10, n) + ord("0")  # area codes do not start with 0 or 1
    userid = np.arange(1, n + 1)
    local_part = pc.utf8_lower(pc.replace_substring(pc.binary_join_element_wise(first, last, "."), "'", ""))
    email = pc.binary_join_element_wise(
        local_part,
        pa.array(userid.astype(str), pa.string()),
        "",
    )
    email = pc.binary_join_element_wise(email, _pick(rng, _DOMAINS, n), "@")
    columns: dict[str, _ColumnData] = {
        "userid": userid,
        "username": pa.array(usernames.astype(object), pa.binary()).cast(pa.string()),
        "firstname": first,
        "lastname": last,
        "city": cities,
        "state": states,
        "email": email,
        "phone": pa.array(phones.view("S14").ravel().astype(object), pa.binary()).cast(pa.string()),
    }
    # TICKIT leaves many preferences unknown: about a third NULL, else true with 40 %
    for like in LIKE_COLUMNS:
        value = rng.random(n) < 0.4
        unknown = rng.random(n) < 0.3
        columns[like] = pa.array(value, pa.bool_(), mask=unknown)
    return _table("users", columns)


def _venue(rng: np.random.Generator, n: int) -> pa.Table:
    city_idx = rng.integers(0, len(_CITIES), n)
    names = pc.binary_join_element_wise(_pick(rng, _VENUE_PREFIXES, n), _pick(rng, _VENUE_KINDS, n), " ")
    seats = rng.integers(20, 800, n) * 100
    no_seats = rng.random(n) < 0.1  # TICKIT has venues without a seat count
    return _table(
        "venue",
        {
            "venueid": np.arange(1, n + 1),
            "venuename": names,
            "venuecity": np.array([c[0] for c in _CITIES], dtype=object)[city_idx],
            "venuestate": np.array([c[1] for c in _CITIES], dtype=object)[city_idx],
            "venueseats": pa.array(seats, pa.int32(), mask=no_seats),
        },
    )


def _event(rng: np.random.Generator, n: int, venues: int) -> tuple[pa.Table, _I64, _I64]:
    """The event table plus its category ids and start times (epoch seconds)."""
    catid = rng.choice(np.arange(1, 12), size=n, p=_CATEGORY_WEIGHTS / _CATEGORY_WEIGHTS.sum())
    day = rng.integers(0, _DAYS, n)
    start_of_day = rng.choice(_START_SECONDS, size=n, p=_START_WEIGHTS)
    start = (_YEAR_START_S + day * _SECONDS_PER_DAY + start_of_day).astype(np.int64)
    names = np.empty(n, dtype=object)
    for cat, pool in _EVENT_NAMES.items():
        mask = catid == cat
        names[mask] = np.asarray(pool, dtype=object)[rng.integers(0, len(pool), int(mask.sum()))]
    table = _table(
        "event",
        {
            "eventid": np.arange(1, n + 1),
            "venueid": rng.integers(1, venues + 1, n),
            "catid": catid,
            "dateid": _dateid(start),
            "eventname": names,
            "starttime": _timestamps(start),
        },
    )
    return table, catid.astype(np.int64), start


def _timestamps(epoch_seconds: _I64) -> pa.Array:
    return pa.array(epoch_seconds * 1_000_000, pa.timestamp("us"))


def _dateid(epoch_seconds: _I64) -> _I64:
    return epoch_seconds // _SECONDS_PER_DAY - _EPOCH_DAY_2008 + _FIRST_DATEID


@dataclass(frozen=True)
class _Listings:
    listid: _I64
    sellerid: _I64
    eventid: _I64
    numtickets: _I64
    price_cents: _I64
    listtime: _I64


def _listing_columns(
    rng: np.random.Generator, n: int, users: int, event_cat: _I64, event_start: _I64
) -> _Listings:
    events = event_start.size
    # a few events are very popular: gamma-distributed popularity
    popularity = rng.gamma(0.6, 1.0, events)
    eventidx = rng.choice(events, size=n, p=popularity / popularity.sum())
    # some users sell a lot
    seller_weight = rng.pareto(2.0, users) + 1.0
    sellerid = rng.choice(users, size=n, p=seller_weight / seller_weight.sum()) + 1
    # 1-30 tickets, small lots most frequent
    lots = np.arange(1, 31)
    lot_weight = 1.0 / lots**0.9
    numtickets = rng.choice(lots, size=n, p=lot_weight / lot_weight.sum())
    # whole-dollar prices around a per-category median, between $20 and $2,500
    median = _CATEGORY_MEDIAN_PRICE[event_cat[eventidx] - 1]
    dollars = np.clip(np.rint(median * rng.lognormal(0.0, 0.6, n)), 20, 2500).astype(np.int64)
    # listed between 90 days and 1 hour before the start, never before 2008-01-01
    start = event_start[eventidx]
    latest = start - 3600
    window = np.minimum(90 * _SECONDS_PER_DAY, latest - _YEAR_START_S)
    listtime = latest - np.floor(rng.random(n) * window).astype(np.int64)
    order = np.argsort(listtime, kind="stable")  # listid grows with list time
    return _Listings(
        listid=np.arange(1, n + 1, dtype=np.int64),
        sellerid=sellerid[order].astype(np.int64),
        eventid=(eventidx[order] + 1).astype(np.int64),
        numtickets=numtickets[order].astype(np.int64),
        price_cents=dollars[order] * 100,
        listtime=listtime[order],
    )


def _listing_table(cols: _Listings) -> pa.Table:
    return _table(
        "listing",
        {
            "listid": cols.listid,
            "sellerid": cols.sellerid,
            "eventid": cols.eventid,
            "dateid": _dateid(cols.listtime),
            "numtickets": cols.numtickets,
            "priceperticket": decimal_from_cents(cols.price_cents),
            "totalprice": decimal_from_cents(cols.price_cents * cols.numtickets),
            "listtime": _timestamps(cols.listtime),
        },
    )


def _sale_table(
    rng: np.random.Generator, n: int, users: int, listings: _Listings, event_start: _I64
) -> pa.Table:
    # Pick n distinct tickets out of all listed tickets; a listing sells in as many sales as
    # tickets were picked from it, so its sales never outnumber its tickets.
    ends = np.cumsum(listings.numtickets)
    picked = np.sort(rng.choice(int(ends[-1]), size=n, replace=False))
    listidx = np.searchsorted(ends, picked, side="right")
    sales_per_listing = np.bincount(listidx, minlength=listings.listid.size)
    count = sales_per_listing[listidx]
    tickets = listings.numtickets[listidx]
    # each sale takes 1 + a share of the tickets left after one per sale: sum <= numtickets
    spare = tickets - count
    qtysold = 1 + np.floor(rng.random(n) * (spare // count + 1)).astype(np.int64)
    qtysold = np.minimum(qtysold, 1 + spare // count)
    pricepaid = qtysold * listings.price_cents[listidx]
    commission = pricepaid * 15 // 100  # exact: whole-dollar prices make 15 % whole cents
    sellerid = listings.sellerid[listidx]
    buyerid = (sellerid - 1 + rng.integers(1, users, n)) % users + 1  # any user but the seller
    listtime = listings.listtime[listidx]
    start = event_start[listings.eventid[listidx] - 1]
    # strictly after the listing (>= 60 s) and before the event starts
    span = start - listtime - 120
    saletime = listtime + 60 + np.floor(rng.random(n) * span).astype(np.int64)
    order = np.argsort(saletime, kind="stable")  # salesid grows with sale time
    return _table(
        "sale",
        {
            "salesid": np.arange(1, n + 1),
            "listid": listings.listid[listidx][order],
            "sellerid": sellerid[order],
            "buyerid": buyerid[order],
            "eventid": listings.eventid[listidx][order],
            "dateid": _dateid(saletime)[order],
            "qtysold": qtysold[order],
            "pricepaid": decimal_from_cents(pricepaid[order]),
            "commission": decimal_from_cents(commission[order]),
            "saletime": _timestamps(saletime[order]),
        },
    )
