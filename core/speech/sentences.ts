/**
 * Everyday sentences in English and German, for hearing the speech organ back: a round trip
 * (speak, then transcribe) of each must come back as it went in. Plain data, shared by the
 * engine's tests and the speech benchmark.
 */
export const everydaySentences = {
  en: [
    'Could you please turn off the lights when you leave the room?',
    'I usually drink a cup of coffee before I start working.',
    'The bus was late again this morning because of the heavy traffic.',
    'We are planning a small birthday party for my sister next weekend.',
    'Please remember to water the plants while I am away.',
    'My brother bought a new bicycle and rides it to school every day.',
    'The library closes early on Sundays, so we should hurry.',
    'She made a delicious soup with fresh vegetables from the garden.',
    'Do you know where I left my keys and my phone?',
    'The children played in the park until it started to rain.',
    'I need to buy milk, bread and eggs at the store.',
    "Our flight leaves at seven o'clock tomorrow evening.",
    'He forgot his umbrella and got completely wet on the way home.',
    "Let's meet at the small cafe next to the train station.",
    'The doctor told me to drink more water and sleep longer.',
    'We watched an old movie together and ate popcorn on the sofa.',
    'Can you help me carry these heavy boxes upstairs?',
    'The weather forecast says it will be sunny all week.',
    'I have been learning to play the guitar for two years.',
    'Thank you very much for your kind letter and the lovely photos.',
  ],
  de: [
    'Am Montag habe ich einen Termin beim Zahnarzt.',
    'Wir kaufen heute Abend Brot, Käse und frisches Obst.',
    'Mein Bruder wohnt seit zwei Jahren in einer kleinen Wohnung.',
    'Kannst du mir bitte sagen, wie spät es ist?',
    'Die Kinder spielen nach der Schule gerne im Garten.',
    'Im Winter trinken wir oft heißen Tee mit Honig.',
    'Der Bus kommt heute leider zehn Minuten später.',
    'Ich habe mein Handy zu Hause auf dem Tisch vergessen.',
    'Am Wochenende besuchen wir unsere Freunde in Hamburg.',
    'Das Restaurant an der Ecke hat sehr gutes Essen.',
    'Morgen früh fahre ich mit dem Zug nach Berlin.',
    'Bitte schließ das Fenster, es wird langsam kalt.',
  ],
} as const;
