"""The toy corpus's words (aiayn.data.toy): real English and German, each list ordered from
common to rare.

A sentence draws a word of a list with weight 1 / rank**ZIPF (aiayn.data.toy), so a few words
are seen thousands of times and most a few dozen: as in real text, a model must learn each rare
noun's gender and plural (which the German article, adjective ending and pronoun depend on) from
few examples. Nouns of the n-declension (Junge, Nachbar, Löwe), whose singular takes -n outside
the nominative, are left out: the toy declines by article and ending only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Noun:
    en: str
    en_plural: str
    de: str
    de_plural: str
    gender: str  # "m", "f" or "n"
    person: bool = False  # English uses he/she for persons, "it" for everything else


@dataclass(frozen=True)
class Verb:
    en_3sg: str
    en_base: str
    en_participle: str
    de_3sg: str
    de_3pl: str
    de_participle: str


def nouns(table: str, person: bool = False) -> list[Noun]:
    """One noun a line: English singular, plural | German singular, plural | gender."""
    return [Noun(*line.replace("|", " ").split(), person=person) for line in lines(table)]


def verbs(table: str) -> list[Verb]:
    """One verb a line, `|`-separated: English 3rd person singular, base form, participle,
    German 3rd person singular, plural, participle."""
    return [Verb(*(field.strip() for field in line.split("|"))) for line in lines(table)]


def pairs(table: str) -> list[tuple[str, str]]:
    """One (English, German) pair a line, `|`-separated."""
    return [tuple(field.strip() for field in line.split("|")) for line in lines(table)]


def lines(table: str) -> list[str]:
    return [line.strip() for line in table.strip().splitlines()]


PERSONS = nouns(
    """
    man men | Mann Männer | m
    woman women | Frau Frauen | f
    child children | Kind Kinder | n
    king kings | König Könige | m
    queen queens | Königin Königinnen | f
    father fathers | Vater Väter | m
    mother mothers | Mutter Mütter | f
    friend friends | Freund Freunde | m
    teacher teachers | Lehrer Lehrer | m
    girl girls | Mädchen Mädchen | n
    brother brothers | Bruder Brüder | m
    sister sisters | Schwester Schwestern | f
    doctor doctors | Arzt Ärzte | m
    son sons | Sohn Söhne | m
    daughter daughters | Tochter Töchter | f
    uncle uncles | Onkel Onkel | m
    aunt aunts | Tante Tanten | f
    guest guests | Gast Gäste | m
    cook cooks | Koch Köche | m
    baker bakers | Bäcker Bäcker | m
    pupil pupils | Schüler Schüler | m
    painter painters | Maler Maler | m
    singer singers | Sänger Sänger | m
    driver drivers | Fahrer Fahrer | m
    waiter waiters | Kellner Kellner | m
    grandmother grandmothers | Großmutter Großmütter | f
    grandfather grandfathers | Großvater Großväter | m
    baby babies | Baby Babys | n
    thief thieves | Dieb Diebe | m
    hunter hunters | Jäger Jäger | m
    fisherman fishermen | Fischer Fischer | m
    actor actors | Schauspieler Schauspieler | m
    actress actresses | Schauspielerin Schauspielerinnen | f
    princess princesses | Prinzessin Prinzessinnen | f
    judge judges | Richter Richter | m
    lawyer lawyers | Anwalt Anwälte | m
    mayor mayors | Bürgermeister Bürgermeister | m
    nurse nurses | Krankenschwester Krankenschwestern | f
    dancer dancers | Tänzer Tänzer | m
    writer writers | Schriftsteller Schriftsteller | m
    worker workers | Arbeiter Arbeiter | m
    boss bosses | Chef Chefs | m
    """,
    person=True,
)
ANIMALS = nouns(
    """
    dog dogs | Hund Hunde | m
    cat cats | Katze Katzen | f
    horse horses | Pferd Pferde | n
    bird birds | Vogel Vögel | m
    mouse mice | Maus Mäuse | f
    sheep sheep | Schaf Schafe | n
    cow cows | Kuh Kühe | f
    fish fish | Fisch Fische | m
    pig pigs | Schwein Schweine | n
    fox foxes | Fuchs Füchse | m
    duck ducks | Ente Enten | f
    chicken chickens | Huhn Hühner | n
    goat goats | Ziege Ziegen | f
    wolf wolves | Wolf Wölfe | m
    frog frogs | Frosch Frösche | m
    snake snakes | Schlange Schlangen | f
    rabbit rabbits | Kaninchen Kaninchen | n
    goose geese | Gans Gänse | f
    bee bees | Biene Bienen | f
    donkey donkeys | Esel Esel | m
    owl owls | Eule Eulen | f
    spider spiders | Spinne Spinnen | f
    deer deer | Hirsch Hirsche | m
    lamb lambs | Lamm Lämmer | n
    tiger tigers | Tiger Tiger | m
    whale whales | Wal Wale | m
    calf calves | Kalb Kälber | n
    butterfly butterflies | Schmetterling Schmetterlinge | m
    rat rats | Ratte Ratten | f
    camel camels | Kamel Kamele | n
    swan swans | Schwan Schwäne | m
    eagle eagles | Adler Adler | m
    shark sharks | Hai Haie | m
    turtle turtles | Schildkröte Schildkröten | f
    hedgehog hedgehogs | Igel Igel | m
    squirrel squirrels | Eichhörnchen Eichhörnchen | n
    fly flies | Fliege Fliegen | f
    ant ants | Ameise Ameisen | f
    bull bulls | Stier Stiere | m
    crow crows | Krähe Krähen | f
    zebra zebras | Zebra Zebras | n
    giraffe giraffes | Giraffe Giraffen | f
    worm worms | Wurm Würmer | m
    crocodile crocodiles | Krokodil Krokodile | n
    bat bats | Fledermaus Fledermäuse | f
    kangaroo kangaroos | Känguru Kängurus | n
    """
)
THINGS = nouns(
    """
    book books | Buch Bücher | n
    table tables | Tisch Tische | m
    house houses | Haus Häuser | n
    door doors | Tür Türen | f
    car cars | Auto Autos | n
    letter letters | Brief Briefe | m
    picture pictures | Bild Bilder | n
    chair chairs | Stuhl Stühle | m
    lamp lamps | Lampe Lampen | f
    window windows | Fenster Fenster | n
    bottle bottles | Flasche Flaschen | f
    tree trees | Baum Bäume | m
    key keys | Schlüssel Schlüssel | m
    cup cups | Tasse Tassen | f
    ball balls | Ball Bälle | m
    bag bags | Tasche Taschen | f
    bed beds | Bett Betten | n
    flower flowers | Blume Blumen | f
    apple apples | Apfel Äpfel | m
    glass glasses | Glas Gläser | n
    hat hats | Hut Hüte | m
    newspaper newspapers | Zeitung Zeitungen | f
    boat boats | Boot Boote | n
    shoe shoes | Schuh Schuhe | m
    clock clocks | Uhr Uhren | f
    train trains | Zug Züge | m
    box boxes | Kiste Kisten | f
    knife knives | Messer Messer | n
    plate plates | Teller Teller | m
    cake cakes | Kuchen Kuchen | m
    dress dresses | Kleid Kleider | n
    coat coats | Mantel Mäntel | m
    map maps | Karte Karten | f
    ship ships | Schiff Schiffe | n
    garden gardens | Garten Gärten | m
    bicycle bicycles | Fahrrad Fahrräder | n
    pen pens | Stift Stifte | m
    jacket jackets | Jacke Jacken | f
    egg eggs | Ei Eier | n
    basket baskets | Korb Körbe | m
    phone phones | Telefon Telefone | n
    stone stones | Stein Steine | m
    candle candles | Kerze Kerzen | f
    shirt shirts | Hemd Hemden | n
    ring rings | Ring Ringe | m
    gift gifts | Geschenk Geschenke | n
    song songs | Lied Lieder | n
    story stories | Geschichte Geschichten | f
    bridge bridges | Brücke Brücken | f
    film films | Film Filme | m
    photo photos | Foto Fotos | n
    mirror mirrors | Spiegel Spiegel | m
    spoon spoons | Löffel Löffel | m
    fork forks | Gabel Gabeln | f
    cheese cheeses | Käse Käse | m
    bus buses | Bus Busse | m
    plane planes | Flugzeug Flugzeuge | n
    tower towers | Turm Türme | m
    church churches | Kirche Kirchen | f
    village villages | Dorf Dörfer | n
    river rivers | Fluss Flüsse | m
    mountain mountains | Berg Berge | m
    forest forests | Wald Wälder | m
    island islands | Insel Inseln | f
    street streets | Straße Straßen | f
    field fields | Feld Felder | n
    room rooms | Zimmer Zimmer | n
    kitchen kitchens | Küche Küchen | f
    roof roofs | Dach Dächer | n
    wall walls | Mauer Mauern | f
    fence fences | Zaun Zäune | m
    gate gates | Tor Tore | n
    cupboard cupboards | Schrank Schränke | m
    shelf shelves | Regal Regale | n
    desk desks | Schreibtisch Schreibtische | m
    sofa sofas | Sofa Sofas | n
    carpet carpets | Teppich Teppiche | m
    pillow pillows | Kissen Kissen | n
    blanket blankets | Decke Decken | f
    oven ovens | Ofen Öfen | m
    fridge fridges | Kühlschrank Kühlschränke | m
    computer computers | Computer Computer | m
    camera cameras | Kamera Kameras | f
    radio radios | Radio Radios | n
    piano pianos | Klavier Klaviere | n
    guitar guitars | Gitarre Gitarren | f
    violin violins | Geige Geigen | f
    drum drums | Trommel Trommeln | f
    doll dolls | Puppe Puppen | f
    toy toys | Spielzeug Spielzeuge | n
    kite kites | Drachen Drachen | m
    balloon balloons | Ballon Ballons | m
    tent tents | Zelt Zelte | n
    suitcase suitcases | Koffer Koffer | m
    envelope envelopes | Umschlag Umschläge | m
    stamp stamps | Briefmarke Briefmarken | f
    notebook notebooks | Heft Hefte | n
    poem poems | Gedicht Gedichte | n
    question questions | Frage Fragen | f
    answer answers | Antwort Antworten | f
    idea ideas | Idee Ideen | f
    plan plans | Plan Pläne | m
    list lists | Liste Listen | f
    bill bills | Rechnung Rechnungen | f
    coin coins | Münze Münzen | f
    wallet wallets | Geldbeutel Geldbeutel | m
    umbrella umbrellas | Schirm Schirme | m
    ticket tickets | Fahrkarte Fahrkarten | f
    sausage sausages | Wurst Würste | f
    potato potatoes | Kartoffel Kartoffeln | f
    tomato tomatoes | Tomate Tomaten | f
    pear pears | Birne Birnen | f
    banana bananas | Banane Bananen | f
    lemon lemons | Zitrone Zitronen | f
    orange oranges | Orange Orangen | f
    carrot carrots | Karotte Karotten | f
    onion onions | Zwiebel Zwiebeln | f
    cherry cherries | Kirsche Kirschen | f
    nut nuts | Nuss Nüsse | f
    mushroom mushrooms | Pilz Pilze | m
    pumpkin pumpkins | Kürbis Kürbisse | m
    cucumber cucumbers | Gurke Gurken | f
    salad salads | Salat Salate | m
    soup soups | Suppe Suppen | f
    bowl bowls | Schüssel Schüsseln | f
    pot pots | Topf Töpfe | m
    pan pans | Pfanne Pfannen | f
    bucket buckets | Eimer Eimer | m
    ladder ladders | Leiter Leitern | f
    hammer hammers | Hammer Hämmer | m
    nail nails | Nagel Nägel | m
    rope ropes | Seil Seile | n
    bell bells | Glocke Glocken | f
    flag flags | Fahne Fahnen | f
    necklace necklaces | Kette Ketten | f
    crown crowns | Krone Kronen | f
    sword swords | Schwert Schwerter | n
    helmet helmets | Helm Helme | m
    glove gloves | Handschuh Handschuhe | m
    sock socks | Socke Socken | f
    button buttons | Knopf Knöpfe | m
    scarf scarves | Schal Schals | m
    belt belts | Gürtel Gürtel | m
    wheel wheels | Rad Räder | n
    engine engines | Motor Motoren | m
    tyre tyres | Reifen Reifen | m
    brush brushes | Bürste Bürsten | f
    comb combs | Kamm Kämme | m
    towel towels | Handtuch Handtücher | n
    sponge sponges | Schwamm Schwämme | m
    soap soaps | Seife Seifen | f
    tin tins | Dose Dosen | f
    biscuit biscuits | Keks Kekse | m
    roll rolls | Brötchen Brötchen | n
    grape grapes | Traube Trauben | f
    leaf leaves | Blatt Blätter | n
    branch branches | Ast Äste | m
    rose roses | Rose Rosen | f
    shell shells | Muschel Muscheln | f
    feather feathers | Feder Federn | f
    bone bones | Knochen Knochen | m
    nest nests | Nest Nester | n
    cloud clouds | Wolke Wolken | f
    star stars | Stern Sterne | m
    bench benches | Bank Bänke | f
    mailbox mailboxes | Briefkasten Briefkästen | m
    castle castles | Schloss Schlösser | n
    """
)
COMPOUND_MODIFIERS = pairs(  # English, German: "the Berlin marathon" -> "der Berlin-Marathon"
    """
    Berlin | Berlin
    Paris | Paris
    EU | EU
    UN | UN
    NATO | NATO
    Rome | Rom
    London | London
    Vienna | Wien
    """
)
COMPOUND_HEADS = nouns(
    """
    marathon marathons | Marathon Marathons | m
    summit summits | Gipfel Gipfel | m
    concert concerts | Konzert Konzerte | n
    election elections | Wahl Wahlen | f
    report reports | Bericht Berichte | m
    debate debates | Debatte Debatten | f
    festival festivals | Festival Festivals | n
    conference conferences | Konferenz Konferenzen | f
    """
)
TRANSITIVE = verbs(  # any subject, any object
    """
    sees | see | seen | sieht | sehen | gesehen
    likes | like | liked | mag | mögen | gemocht
    finds | find | found | findet | finden | gefunden
    hears | hear | heard | hört | hören | gehört
    carries | carry | carried | trägt | tragen | getragen
    searches for | search for | searched for | sucht | suchen | gesucht
    needs | need | needed | braucht | brauchen | gebraucht
    holds | hold | held | hält | halten | gehalten
    loves | love | loved | liebt | lieben | geliebt
    knows | know | known | kennt | kennen | gekannt
    takes | take | taken | nimmt | nehmen | genommen
    catches | catch | caught | fängt | fangen | gefangen
    pulls | pull | pulled | zieht | ziehen | gezogen
    pushes | push | pushed | schiebt | schieben | geschoben
    hides | hide | hidden | versteckt | verstecken | versteckt
    forgets | forget | forgotten | vergisst | vergessen | vergessen
    touches | touch | touched | berührt | berühren | berührt
    fetches | fetch | fetched | holt | holen | geholt
    """
)
PERSON_ONLY_TRANSITIVE = verbs(  # a person does it
    """
    buys | buy | bought | kauft | kaufen | gekauft
    paints | paint | painted | malt | malen | gemalt
    draws | draw | drawn | zeichnet | zeichnen | gezeichnet
    washes | wash | washed | wäscht | waschen | gewaschen
    sells | sell | sold | verkauft | verkaufen | verkauft
    visits | visit | visited | besucht | besuchen | besucht
    describes | describe | described | beschreibt | beschreiben | beschrieben
    photographs | photograph | photographed | fotografiert | fotografieren | fotografiert
    throws | throw | thrown | wirft | werfen | geworfen
    chooses | choose | chosen | wählt | wählen | gewählt
    repairs | repair | repaired | repariert | reparieren | repariert
    cleans | clean | cleaned | putzt | putzen | geputzt
    steals | steal | stolen | stiehlt | stehlen | gestohlen
    counts | count | counted | zählt | zählen | gezählt
    opens | open | opened | öffnet | öffnen | geöffnet
    closes | close | closed | schließt | schließen | geschlossen
    """
)
DATIVE_VERBS = verbs(  # German governs the object in the dative: "hilft dem Hund"
    """
    helps | help | helped | hilft | helfen | geholfen
    thanks | thank | thanked | dankt | danken | gedankt
    trusts | trust | trusted | vertraut | vertrauen | vertraut
    answers | answer | answered | antwortet | antworten | geantwortet
    """
)
INTRANSITIVE = verbs(
    """
    sleeps | sleep | slept | schläft | schlafen | geschlafen
    waits | wait | waited | wartet | warten | gewartet
    plays | play | played | spielt | spielen | gespielt
    laughs | laugh | laughed | lacht | lachen | gelacht
    sings | sing | sung | singt | singen | gesungen
    works | work | worked | arbeitet | arbeiten | gearbeitet
    dances | dance | danced | tanzt | tanzen | getanzt
    cries | cry | cried | weint | weinen | geweint
    eats | eat | eaten | isst | essen | gegessen
    reads | read | read | liest | lesen | gelesen
    swims | swim | swum | schwimmt | schwimmen | geschwommen
    runs | run | run | läuft | laufen | gelaufen
    """
)
DITRANSITIVE = verbs(  # "X gives Y Z" / "X gives Z to Y": German dative Y, accusative Z
    """
    gives | give | given | gibt | geben | gegeben
    shows | show | shown | zeigt | zeigen | gezeigt
    sends | send | sent | schickt | schicken | geschickt
    brings | bring | brought | bringt | bringen | gebracht
    """
)
ADJECTIVES = pairs(  # German stems that take an ending as they are (no leise, teuer, dunkel)
    """
    big | groß
    small | klein
    old | alt
    new | neu
    red | rot
    beautiful | schön
    heavy | schwer
    young | jung
    good | gut
    long | lang
    green | grün
    black | schwarz
    white | weiß
    blue | blau
    happy | glücklich
    hungry | hungrig
    yellow | gelb
    brown | braun
    grey | grau
    warm | warm
    cold | kalt
    short | kurz
    strong | stark
    fast | schnell
    slow | langsam
    clever | klug
    rich | reich
    poor | arm
    sad | traurig
    friendly | freundlich
    wild | wild
    quiet | ruhig
    nice | nett
    sweet | süß
    fresh | frisch
    full | voll
    empty | leer
    round | rund
    thin | dünn
    pretty | hübsch
    ugly | hässlich
    bad | schlecht
    important | wichtig
    famous | berühmt
    wet | nass
    dry | trocken
    soft | weich
    hard | hart
    clean | sauber
    dirty | schmutzig
    cheap | billig
    """
)
ADVERBS = pairs(
    """
    today | heute
    now | jetzt
    in the morning | am Morgen
    in the evening | am Abend
    on Sunday | am Sonntag
    often | oft
    sometimes | manchmal
    on Monday | am Montag
    at noon | am Mittag
    in summer | im Sommer
    in winter | im Winter
    on Friday | am Freitag
    at night | in der Nacht
    on Saturday | am Samstag
    """
)
MATRIX = pairs(  # subject and verb that introduce a "that"-clause
    """
    I know | ich weiß
    we think | wir denken
    she says | sie sagt
    he hopes | er hofft
    they believe | sie glauben
    I think | ich denke
    he says | er sagt
    we know | wir wissen
    she hopes | sie hofft
    I believe | ich glaube
    they say | sie sagen
    he believes | er glaubt
    """
)
MODALS = [  # English 3sg, plural, German 3sg, plural: the German infinitive goes last
    ("can", "can", "kann", "können"),
    ("must", "must", "muss", "müssen"),
    ("wants to", "want to", "will", "wollen"),
]
PREPOSITIONS = [  # English, German, the case the German preposition governs
    ("with", "mit", "dat"),
    ("without", "ohne", "acc"),
    ("for", "für", "acc"),
    ("from", "von", "dat"),
    ("near", "bei", "dat"),
]
