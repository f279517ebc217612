"""Source text of the bundled short prompts (chat, code, math), written for this project.

`make_prompts.py` turns these lists (and the generated long-context documents) into the package data
under python/sglang_kimi_eagle3/bench/prompts/*.json with each prompt's length recorded.
"""

CHAT = [
    "I'm planning a three-day trip to Lisbon in early spring. Suggest an itinerary that mixes museums, food and a day trip, and say roughly what each day costs.",
    "My team keeps missing sprint deadlines. As an engineering manager, what questions should I ask in the next retrospective, and what would you watch for in the answers?",
    "Explain to a curious twelve-year-old why the sky is blue during the day but red and orange at sunset.",
    "Write a polite but firm email to a landlord asking for a broken heater to be repaired within a week, mentioning that I reported it twice already.",
    "What are the main differences between a Roth IRA and a traditional IRA? Give a short example where each one is the better choice.",
    "Summarize the plot of a story about a lighthouse keeper who finds a message in a bottle, then suggest three possible endings with different moods.",
    "I have chicken thighs, rice, a lemon, garlic, spinach and yoghurt. Give me a dinner recipe for two with step-by-step instructions and timings.",
    "Compare learning the piano and the guitar as an adult beginner: cost, time to play a first song, and how each helps with music theory.",
    "Draft a five-minute toast for my sister's wedding. She is a marine biologist, her partner is a chef, and they met at a diving school.",
    "What should I check before buying a used electric car? Make a checklist with a sentence of explanation per item.",
    "Give me arguments for and against a four-day work week, then say which side you find stronger and why.",
    "Translate into French and then explain the grammar choices: 'We would have arrived earlier if the train had not been cancelled.'",
]

CODE = [
    "Write a Python function that merges overlapping intervals given as a list of (start, end) tuples, with docstring, type hints and three pytest tests.",
    "Implement an LRU cache class in Python with get and put in O(1), without using functools or OrderedDict. Explain the data structures you chose.",
    "Write a bash script that finds the ten largest files under a directory given as an argument, prints their sizes in human-readable form, and handles paths with spaces.",
    "In Rust, write a function that parses a line like 'key1=value1;key2=value2' into a HashMap<String, String>, returning an error for malformed pairs. Include unit tests.",
    "Write a SQL query that returns, for each customer, their three most recent orders with order total, given tables customers(id, name) and orders(id, customer_id, created_at, total).",
    "Explain what this Python code does and fix its bug:\n\ndef average(xs):\n    total = 0\n    for i in range(1, len(xs)):\n        total += xs[i]\n    return total / len(xs)\n",
    "Write a TypeScript React component that shows a paginated table of users fetched from /api/users?page=N, with loading and error states.",
    "Implement binary search in C that returns the index of the first element greater than or equal to a target in a sorted int array, and explain the loop invariant.",
    "Write a Python asyncio program that downloads a list of URLs with at most five concurrent requests and retries each failed request twice with exponential backoff.",
    "Refactor this JavaScript to use async/await and proper error handling:\n\nfunction load(cb) {\n  fetch('/config').then(r => r.json()).then(cfg => {\n    fetch(cfg.url).then(r => r.text()).then(t => cb(null, t));\n  });\n}\n",
    "Write a Go HTTP handler that accepts a JSON body {\"name\": string, \"age\": int}, validates it, and responds with 400 and a JSON error message when validation fails.",
    "Write a Triton-style pseudo-code kernel description for a row-wise softmax over a [rows, cols] matrix and explain how you would handle cols larger than the block size.",
]

MATH = [
    "A train leaves a station at 9:00 travelling at 80 km/h. A second train leaves the same station at 10:30 on the same track at 120 km/h. At what time does the second train catch up? Show your work.",
    "Solve for x: 3(x - 4) + 2x = 5x - 12 + x. Explain each step.",
    "A shop sells pens at 3 for $2 and notebooks at $4.50 each. Maria buys 12 pens and 3 notebooks and pays with a $50 bill. How much change does she get? Think step by step.",
    "Prove that the sum of the first n odd numbers equals n squared.",
    "What is the probability of getting at least one six when rolling four fair dice? Give an exact fraction and a decimal.",
    "A rectangle has a perimeter of 54 cm and its length is twice its width plus 3 cm. Find its area.",
    "Compute the derivative of f(x) = x^3 * ln(x) and find the x where f'(x) = 0 for x > 0.",
    "There are 5 red, 4 blue and 3 green balls in a bag. Two balls are drawn without replacement. What is the probability that they have different colours?",
    "Find all integer solutions of x^2 - y^2 = 45 with x and y positive.",
    "A population of bacteria doubles every 3 hours. Starting from 500 bacteria, how many are there after 1 day, and after how many hours does it first exceed one million?",
    "Evaluate the integral of x * e^(2x) dx from 0 to 1 using integration by parts.",
    "Tom is twice as old as Ann was when Tom was as old as Ann is now. Tom is 24. How old is Ann? Explain your reasoning.",
]
