"""The words the contradiction check (compiler.memory.contradiction) knows, English and Spanish.

Stems are snowball stems of folded text (lower case, no accents). Data only: the rules that use
these words live in contradiction.py.
"""

from __future__ import annotations

# (class, polarity, kind) → English and Spanish stems. Kinds: "part" takes an object unless it is
# a participle after a copula; "obj" always an object; "subj" always the subject (intransitive);
# "abandon" X for Y; "replace" X with Y; "move" from X to Y (polarity -1: the side left behind).
LEXICON = {
    ("like", 1, "part"): "prefer like love enjoy favor favour want recommend prefier preferi pref prefiri gust "
    "encant quier quer recomiend recomend",
    ("like", -1, "part"): "hate dislik despis detest odi",
    ("like", 1, "obj"): "happi satisfi fan",
    ("like", -1, "obj"): "frustrat annoy unhappi hart frustr molest",
    ("use", 1, "part"): "use choos chose chosen adopt pick usa usan uso usab usar usand usad usam utiliz eleg elig",
    ("use", -1, "part"): "avoid ban forbid forbidden discourag evit prohib",
    ("use", -1, "abandon"): "abandon drop ditch dump remov retir deprec sunset descart elimin dej obsolet",
    ("use", -1, "replace"): "replac substitut swap reemplaz sustitu",
    ("use", -1, "move"): "switch migrat move chang camb cambi migr pas mud mov",
    ("state", 1, "part"): "enabl activ habilit encend",
    ("state", -1, "part"): "disabl deactiv desactiv desact deshabilit apag",
    ("state", 1, "subj"): "avail dispon",
    ("state", -1, "subj"): "unavail",
    ("approval", 1, "part"): "approv accept aprob acept",
    ("approval", -1, "part"): "reject declin deni veto rechaz deneg",
    ("health", 1, "part"): "fix resolv arregl resuelt solucion correg",
    ("health", 1, "subj"): "work pass succeed stabl funcion establ",
    ("health", -1, "subj"): "fail broken broke crash flaki unstabl down fall rot romp caid inest",
    ("health", -1, "part"): "break",
    ("truth", 1, "subj"): "true correct accur valid ciert verdad verdader",
    ("truth", -1, "subj"): "fals wrong incorrect inaccur invalid erron",
}
LEX = {stem: key for key, stems in LEXICON.items() for stem in stems.split()}
TO_SIDE = {("replace", w) for w in ("with", "con", "por", "by", "for")} | {("abandon", "for"), ("abandon", "por")}

NEG = {"_neg_", "not", "no", "never", "nunca", "jamas", "tampoco", "ni", "nor", "none", "nobody", "nadie", "nada"}
COPULA = set("""is are was were be been being es son era eran fue fueron sera seran esta estan estaba estaban estuvo
sigue siguen queda quedo remains remain stays stay get gets got become becomes became seems seem""".split())
GENERIC = {word: "@" + group.split()[0] for group in ["user users usuario usuaria usuarios",
            "project projects proyecto proyectos", "team teams equipo equipos"] for word in group.split()}
STOP = set("""a an the of to and or it its this that these those which who whom what there their they them he she
we i you our my his her your us me all every each any some many much more most too very just still
also now then only already always often usually really again anymore either as so than via does do
did done has have had will would should must can could may might shall need needs here up out about
into across between per with by from over said says say asked asks ask told tell mentioned decided
decides decide agreed agrees thinks think believes noted confirmed trying tries tried try started
going
el la los las lo le les un una unos unas de del al y e o u que se su sus mi mis tu nos por con como
ahora ya siempre todo toda todos todas cada muy mas tambien solo aun todavia hoy este estos estas
ese esa eso esos esas hay ha han he hemos a hacia dijo dice pidio pide decidio comento menciono
confirmo cree piensa acordo""".split())
QUAL = set("in on at for during within without before except unless if when under".split())
QUAL |= set("para en durante sin salvo excepto si cuando antes".split())
STRONG = set(".;:!?()") | set("because since after although though while whereas".split())
STRONG |= set("porque desde tras despues aunque mientras".split())
CONTRAST = {"but", "pero", "sino", "however", "yet"}
WEAK = {",", "and", "or", "y", "e", "o", "u", "then", "luego"}
DETERMINERS = {False: set("the a an this that its their his her our my your".split()),
                True: set("el la los las un una unos unas su sus del".split())}  # Spanish "a" is "to"
VERB_AFTER = {  # ambiguous words are verbs only after these ("tools like X", "to work on")
    "like": NEG | {"", "i", "we", "they", "you", "would", "do", "does", "did", "really", "also", "still", "users"},
    "work": NEG | {"does", "do", "did", "will", "would", "should", "must", "can", "could"}, "down": COPULA,
}
ID_WORDS = {"bug", "issue", "ticket", "pr", "incident", "step", "phase", "line", "page", "item", "caso", "fase"}
ES_MARK = set("el la los las de del que y es esta para por con un una se le ya nunca usa".split())
EN_MARK = set("the is are was and of to with for not never does a an uses".split())
PARTICIPLE = ("ed", "en", "ado", "ada", "ados", "adas", "ido", "ida", "idos", "idas", "to", "ta", "tos", "tas")
