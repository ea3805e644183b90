"""Written by scripts/make_reply_lookalikes.py: do not edit by hand. The real words a
conversation word with a slip of the keys looks like (of wordfreq's 50,000 commonest in
six languages): they stay topics."""

_WORDS = """
    agrede agrees aldo alzo arche aree atop aure bang beat bebe bello bend bens bight boing
    bold bope buen cair calo cancelo carey carr carrey cary catchy cath cero cerro cert
    certi ceto cheer chers cine coil coll cone cook coop corse cours crap curse dall deems
    dense dine dome dons dure eight ello eure ever fake fall fight fije find fins fodo fone
    food fool foret forge forger foule fright fune gain gang gene gien gime ging godo goin
    gold gong goof goth gotha grat greed haga haja hana hanf hank hanks hat's hats haya head
    heat hell hice hing hole hood hoops hope hour hust ight ignored ignorer ignote indo isto
    iver jang jeep jello jever jove keel kike kind kook lave lease leaved legs leve lieto
    lime liso list lito live lobe loge loks loom looms loos luke macy maes make makers males
    mames mamy mang manu marce march marched marcher mayne meat mice mich might minc mine
    mins mond mund must nach nang near neger nello nene nest neve newt nics nigh noce note
    noter notes nove ober orks ourse past pease pets pike pint pleas pleased pleaser poing
    pointy pont pops prog pron prov quie quit quits quitte quote rake rally rever rime rodo
    roer role rong roter roue rouler rover royer rudo rule sait sart seeks seem sees sell
    sende senese sens sensed shat shop sight sire snip sone sound stadt star starr starrt
    stat statt suely surly surs sweety tale tame tank tanks tart thani thanos thar that'd
    thats thay thin thingy thong thos thumb thunk thus tido tight tine ting tink toco todi
    tome toro tour treat tuco tuen tufo tying undp vall vene vien vine weite weitere weitet
    what'd whats whip whoop wight wong work worker worm worms worry wounds wring writer yang
    yodo youd youre
"""
LOOKALIKE_WORDS = frozenset(_WORDS.split())
# `replies.slip_forms_digest()` when this was written: a test compares it with today's
FORMS_DIGEST = "98625d82f1ca9917"
