"""Text bank for the demo product-review generator (``seed_reviews.py``): vocabularies and sentences.

Templates are ``str.format_map`` strings; the slot names they may use are the keys produced by
``seed_reviews._slots`` (item, price, days, weeks, months, n, hours, minutes). English sentences end with
their own punctuation and are joined with a space; Chinese ones end with 。！？ or an emoji and are
joined without one. Every sentence except those in the ``EMOJI*`` pools contains letters, so a body
made only of emoji exists only where the generator puts one on purpose.

Sentiment is carried by the pools a review draws from (``POS``/``NEG``/``NEUTRAL``/``SARCASM``/...),
not stored: recovering it is the sentiment task's job.
"""

# Product listing -> (category, list price in USD, list price in CNY). Fictional brands.
PRODUCTS = {
    "Brewista Duo Espresso Machine": ("coffee", 349, 2499),
    "Kaffa One-Touch Bean-to-Cup": ("coffee", 599, 3999),
    "MokaPro Capsule Coffee Maker": ("coffee", 89, 599),
    "Sonix Air Pro 3 Earbuds": ("headphones", 129, 899),
    "Sonix Studio ANC Headphones": ("headphones", 249, 1699),
    "Pulse Buds Lite": ("headphones", 29, 169),
    "Nova X12 Pro 256GB": ("phone", 799, 4999),
    "Nova X12 Lite": ("phone", 299, 1799),
    "Orbit S9 5G": ("phone", 549, 3299),
    "CleanBot R7 Robot Vacuum": ("vacuum", 399, 2599),
    "Whirlix V15 Cordless Vacuum": ("vacuum", 299, 1999),
    "CrispAir 5.5L Air Fryer": ("air_fryer", 79, 399),
    "CrispAir Dual 9L Air Fryer": ("air_fryer", 149, 699),
    "PureBreeze 400 Air Purifier": ("purifier", 199, 1299),
    "Teamo Smart Kettle 1.7L": ("kettle", 49, 229),
    "Orbit Watch 4": ("smartwatch", 199, 1299),
    "BrightSmile Sonic 5 Toothbrush": ("toothbrush", 59, 299),
    "Zephyr Ionic Hair Dryer": ("hair_dryer", 89, 599),
    "AquaWave 10kg Front-Load Washer": ("washer", 649, 3599),
    "Mimi IH Rice Cooker 3L": ("rice_cooker", 129, 699),
}
# How often each listing is reviewed, relative to the others (same order as PRODUCTS).
PRODUCT_WEIGHTS = (8, 4, 6, 10, 5, 7, 9, 6, 5, 6, 4, 8, 4, 3, 4, 5, 3, 3, 2, 5)

ITEM = {
    "en": {"coffee": "machine", "headphones": "pair of headphones", "phone": "phone", "vacuum": "vacuum",
           "air_fryer": "air fryer", "purifier": "purifier", "kettle": "kettle", "smartwatch": "watch",
           "toothbrush": "toothbrush", "hair_dryer": "hair dryer", "washer": "washer", "rice_cooker": "rice cooker"},
    "zh": {"coffee": "咖啡机", "headphones": "耳机", "phone": "手机", "vacuum": "吸尘器", "air_fryer": "空气炸锅",
           "purifier": "净化器", "kettle": "电水壶", "smartwatch": "手表", "toothbrush": "电动牙刷",
           "hair_dryer": "吹风机", "washer": "洗衣机", "rice_cooker": "电饭煲"},
}

# --- aspects per category: positive and negative sentences ---------------------------------------

ASPECTS = {
    "en": {
        "coffee": {
            "pos": ("The espresso has a thick crema, better than my local café.", "Heats up in under a minute.",
                    "The milk frother makes proper microfoam for lattes.", "Descaling is simple and the app reminds you.",
                    "The grinder is surprisingly quiet for a bean-to-cup."),
            "neg": ("The pump is loud enough to wake the whole house.", "Leaks water from the bottom after a few uses.",
                    "The coffee comes out lukewarm no matter what setting I use.",
                    "The drip tray fills up after three cups.", "The grinder jammed in the first week."),
        },
        "headphones": {
            "pos": ("Noise cancelling is excellent on the train.", "Battery easily lasts a full week of commuting.",
                    "Sound is clear with deep bass without being muddy.", "They fit snugly and don't fall out when running.",
                    "Pairing with my phone took two seconds."),
            "neg": ("The left earbud keeps disconnecting.", "Battery dropped to about {hours} hours after a month.",
                    "The mic is useless on calls, everyone says I sound like I'm underwater.",
                    "They hurt my ears after an hour.", "The case hinge feels cheap and already wobbles."),
        },
        "phone": {
            "pos": ("The camera is amazing in low light.", "Battery gets me through a full day with heavy use.",
                    "The screen is bright and super smooth.", "Fast charging really is fast: 50% in {minutes} minutes.",
                    "Feels premium in the hand and it's light."),
            "neg": ("Gets really hot when gaming or charging.", "Battery drains overnight even in standby.",
                    "The camera app lags and takes blurry photos indoors.", "Lots of preinstalled bloatware you can't remove.",
                    "The fingerprint reader fails half the time."),
        },
        "vacuum": {
            "pos": ("Suction is strong, it picks up all the cat hair.", "The mapping is accurate and the app is easy.",
                    "Quiet enough to run while I'm working from home.", "It empties itself into the base, love that.",
                    "Gets under the sofa where I never reach."),
            "neg": ("Gets stuck on every rug and cable.", "The app loses the map every few days.",
                    "Battery only lasts about {minutes} minutes.", "The brush tangles with hair constantly.",
                    "Keeps bumping into furniture and left scratches on the table legs."),
        },
        "air_fryer": {
            "pos": ("Fries come out crispy without oil.", "The basket is easy to clean, dishwasher safe.",
                    "Preheats fast and cooks evenly.", "Big enough for a whole chicken.",
                    "I use it every day now, the oven hasn't been on in weeks."),
            "neg": ("The non-stick coating started peeling after {weeks} weeks.", "Smells like plastic every time I use it.",
                    "Cooks unevenly, I have to shake it constantly.", "The basket is smaller than it looks.",
                    "The timer knob broke off."),
        },
        "purifier": {
            "pos": ("Air quality reading dropped from red to green within an hour.", "Silent on sleep mode.",
                    "My allergies are noticeably better.", "Filter replacement is easy.",
                    "The auto mode actually reacts when I cook."),
            "neg": ("The sensor always shows 'excellent', even when I burn toast.", "Replacement filters are ridiculously expensive.",
                    "Makes a high-pitched whine on the medium setting.", "Too weak for anything bigger than a bedroom.",
                    "The app won't connect to my Wi-Fi."),
        },
        "kettle": {
            "pos": ("Boils a full kettle in about three minutes.", "The temperature presets are perfect for green tea.",
                    "Keep-warm function is really handy.", "No plastic taste at all.", "Looks great on the counter."),
            "neg": ("The lid doesn't close properly and steam leaks.", "The water tastes of plastic.",
                    "Limescale builds up fast on the bottom.", "The handle gets too hot to hold.",
                    "It switched itself off before boiling."),
        },
        "smartwatch": {
            "pos": ("Sleep tracking is surprisingly accurate.", "Battery lasts {n} days with the always-on display.",
                    "GPS locks quickly on runs.", "Notifications are reliable and the strap is comfortable.",
                    "Heart rate matches my chest strap."),
            "neg": ("The step counter counts steps while I'm driving.", "Notifications stop arriving after a day.",
                    "Battery barely lasts a day.", "The strap gave me a rash.", "The GPS drifts all over the place."),
        },
        "toothbrush": {
            "pos": ("My teeth feel dentist-clean.", "Battery lasts weeks on one charge.",
                    "The pressure sensor is genuinely helpful.", "Gentle mode is great for sensitive gums.",
                    "The travel case is a nice touch."),
            "neg": ("Vibration is so strong it tickles my nose.", "Replacement heads cost a fortune.",
                    "Stopped holding a charge after a month.", "Water got inside the handle.",
                    "The timer beeps are way too quiet."),
        },
        "hair_dryer": {
            "pos": ("Dries my long hair in ten minutes.", "Leaves my hair smooth, not frizzy.",
                    "Lightweight and my arm doesn't get tired.", "Much quieter than my old one.",
                    "The cool shot button actually works."),
            "neg": ("It smells like burning after a few minutes.", "Way too loud.", "The cord is too short.",
                    "It gets so hot it burned my scalp.", "The nozzle keeps falling off."),
        },
        "washer": {
            "pos": ("Very quiet, even on the spin cycle.", "The quick wash is really quick and clean.",
                    "Uses noticeably less water than our old machine.", "Installation team was professional.",
                    "Clothes come out barely wrinkled."),
            "neg": ("Walks across the floor on the spin cycle.", "The door seal smells musty after a month.",
                    "Error code E21 every other wash.", "Cycles take forever, {hours} hours for a normal wash.",
                    "Leaves detergent residue on dark clothes."),
        },
        "rice_cooker": {
            "pos": ("The rice comes out fluffy every time.", "The timer means breakfast porridge is ready when I wake up.",
                    "The inner pot is heavy and well made.", "Easy to clean.", "Brown rice setting works great."),
            "neg": ("The rice sticks and burns at the bottom.", "The coating flaked off into the rice.",
                    "Steam leaks from the lid.", "Takes over an hour for a basic batch.",
                    "The display is unreadable in the kitchen light."),
        },
    },
    "zh": {
        "coffee": {
            "pos": ("萃取的油脂很厚，比楼下咖啡店还好喝。", "预热不到一分钟就能用。", "打奶泡很细腻，拉花新手也能用。",
                    "除垢很方便，App 会提醒。", "研磨的声音比想象中小很多。"),
            "neg": ("泵的声音太大了，一早起来全家都被吵醒。", "用了几次底部就开始漏水。", "做出来的咖啡是温的，怎么调都不烫。",
                    "接水盘太小，三杯就满了。", "第一周磨豆机就卡住了。"),
        },
        "headphones": {
            "pos": ("降噪效果很好，地铁上几乎听不到噪音。", "续航很顶，通勤用一周不用充。", "音质清晰，低音有力又不糊。",
                    "佩戴很稳，跑步也不掉。", "连手机两秒就配对上了。"),
            "neg": ("左耳老是断连。", "用了一个月续航就只剩{hours}个小时了。", "通话麦克风很差，对方说我像在水里说话。",
                    "戴一个小时耳朵就疼。", "充电仓的盖子很松，做工一般。"),
        },
        "phone": {
            "pos": ("夜景拍照很强。", "重度使用一天一充没问题。", "屏幕很亮，刷起来特别流畅。",
                    "快充是真的快，{minutes}分钟充到一半。", "手感很好，拿在手里很轻。"),
            "neg": ("打游戏和充电的时候发热严重。", "待机一晚上掉电很多。", "相机打开很卡，室内拍照糊。",
                    "预装软件太多还删不掉。", "指纹解锁一半时候识别不了。"),
        },
        "vacuum": {
            "pos": ("吸力很强，猫毛都能吸干净。", "建图很准，App 也简单好用。", "声音不大，在家办公也不影响。",
                    "自动集尘太省心了。", "沙发底下也能钻进去扫。"),
            "neg": ("地毯和电线都会卡住。", "App 隔几天就丢地图。", "续航只有{minutes}分钟左右。", "滚刷老是缠头发。",
                    "到处乱撞，桌腿都被撞出划痕了。"),
        },
        "air_fryer": {
            "pos": ("不放油薯条也很脆。", "炸篮好清洗，可以进洗碗机。", "预热快，受热均匀。", "容量大，能放下一整只鸡。",
                    "现在每天都在用，烤箱几个星期没开过了。"),
            "neg": ("用了{weeks}周不粘涂层就开始掉了。", "每次用都有一股塑料味。", "受热不均匀，要一直翻。",
                    "炸篮比图片上小很多。", "定时旋钮直接掉了。"),
        },
        "purifier": {
            "pos": ("一个小时空气质量就从红色变成绿色了。", "睡眠模式几乎没声音。", "过敏症状明显好多了。",
                    "换滤芯很方便。", "自动模式做饭的时候真的会加速。"),
            "neg": ("传感器永远显示“优”，烤糊了面包都不变。", "替换滤芯贵得离谱。", "中档的时候有很尖的啸叫声。",
                    "除了卧室，大一点的房间根本不够用。", "App 连不上家里的 Wi-Fi。"),
        },
        "kettle": {
            "pos": ("一壶水三分钟左右就开了。", "有温度档位，泡绿茶刚刚好。", "保温功能很实用。", "完全没有塑料味。",
                    "颜值很高，放在厨房很好看。"),
            "neg": ("盖子关不严，一直漏蒸汽。", "烧出来的水有塑料味。", "底部很快就结水垢了。", "把手太烫了拿不住。",
                    "还没烧开就自己断电了。"),
        },
        "smartwatch": {
            "pos": ("睡眠监测挺准的。", "开着息屏显示也能用{n}天。", "跑步 GPS 定位很快。", "消息提醒很及时，表带也舒服。",
                    "心率和胸带测的基本一致。"),
            "neg": ("开车的时候也在记步数。", "戴一天之后消息就不提醒了。", "续航勉强撑一天。", "表带把手腕磨得过敏了。",
                    "GPS 轨迹飘得厉害。"),
        },
        "toothbrush": {
            "pos": ("刷完像刚洗过牙一样干净。", "充一次电能用好几周。", "压力提醒很有用。", "温和模式对牙龈敏感的人很友好。",
                    "还送了旅行盒，很贴心。"),
            "neg": ("震得太厉害了，鼻子都痒。", "替换刷头太贵了。", "一个月后就充不进电了。", "手柄进水了。",
                    "计时提醒声音太小听不见。"),
        },
        "hair_dryer": {
            "pos": ("长头发十分钟就吹干了。", "吹完头发顺滑不毛躁。", "很轻，举久了手也不酸。", "比我以前那个安静多了。",
                    "冷风键很好用。"),
            "neg": ("吹几分钟就有焦味。", "噪音太大了。", "电源线太短。", "温度太高，头皮都烫到了。", "风嘴老是掉。"),
        },
        "washer": {
            "pos": ("脱水的时候也很安静。", "快洗模式真的快，也洗得干净。", "比老洗衣机省水多了。", "安装师傅很专业。",
                    "洗出来的衣服几乎没有褶皱。"),
            "neg": ("脱水的时候整台机器在地上走。", "用了一个月门封条就有霉味。", "隔一次就报 E21 故障码。",
                    "标准洗要{hours}个小时，太慢了。", "深色衣服上有洗衣液残留。"),
        },
        "rice_cooker": {
            "pos": ("煮出来的米饭很香很软。", "预约功能很好用，早上起来粥就好了。", "内胆很厚实，做工不错。", "清洗很方便。",
                    "糙米模式煮得很好。"),
            "neg": ("米饭粘底还有糊味。", "内胆涂层掉到饭里了。", "盖子漏蒸汽。", "煮一锅饭要一个多小时。",
                    "显示屏在厨房灯下根本看不清。"),
        },
    },
}

# --- generic sentences ----------------------------------------------------------------------------

POS = {
    "en": ("Really happy with it.", "Exceeded my expectations.", "Build quality feels premium.",
           "Does exactly what it says.", "Honestly a game changer.", "Works perfectly, no complaints.",
           "Best purchase I've made this year.", "My wife loves it too.", "10/10 would buy again."),
    "zh": ("非常满意！", "超出预期。", "做工精细，质感很好。", "和描述的一模一样。", "颜值高，用着也顺手。",
           "家里人都说好用。", "这是今年买得最值的东西了。", "已经推荐给朋友了。", "第二次回购了，一如既往的好。"),
}
NEG = {
    "en": ("Very disappointed.", "Feels cheap and flimsy.", "Not as described at all.", "Complete waste of money.",
           "I regret buying this.", "Quality control is clearly nonexistent.", "Worst purchase in years.",
           "Stopped working after {days} days."),
    "zh": ("非常失望。", "做工粗糙，很廉价的感觉。", "和描述完全不符。", "纯属浪费钱。", "后悔买了。",
           "品控太差了。", "踩雷了。", "用了{days}天就坏了。"),
}
NEUTRAL = {
    "en": ("Just arrived, haven't used it much yet.", "It does what it says, nothing special.",
           "Looks the same as in the pictures.", "Bought it for my parents, they haven't said much yet.",
           "Average product for the price.", "It's fine for occasional use.", "Setup took about {minutes} minutes.",
           "Comes with a manual in several languages."),
    "zh": ("刚收到，还没怎么用。", "中规中矩吧，没什么特别的。", "和图片上一样。", "买给爸妈的，他们还没说好不好。",
           "这个价位就这样了。", "偶尔用用够了。", "安装大概花了{minutes}分钟。", "说明书是中英文的。"),
}
LOGISTICS = {
    "en": {"pos": ("Arrived in two days, well packed.", "Delivery was faster than promised.", "Box arrived in perfect condition."),
           "neg": ("The box arrived crushed.", "Delivery took almost two weeks.", "The courier left it in the rain.")},
    "zh": {"pos": ("物流很快，第二天就到了。", "包装很严实，没有磕碰。", "快递小哥送货上门，很给力。"),
           "neg": ("快递太慢了，等了一个多星期。", "外箱都压扁了。", "快递直接扔在门口，也不打电话。")},
}
SERVICE = {
    "en": {"pos": ("Customer service replied within an hour and sorted everything.", "The seller sent a free replacement part."),
           "neg": ("Customer service just sends copy-paste answers.", "The seller ignored my messages for a week.")},
    "zh": {"pos": ("客服很耐心，问什么都回答。", "商家主动补发了配件，服务很好。"),
           "neg": ("客服一直复制粘贴，根本不解决问题。", "联系商家一个星期都没人理。")},
}
VALUE = {
    "en": {"pos": ("Great value for {price}.", "Cheaper than the big brands and just as good."),
           "neg": ("Overpriced for what you get.", "For {price} I expected much better.")},
    "zh": {"pos": ("性价比高！", "{price}买的，值了。", "比大牌便宜很多，效果不输。"),
           "neg": ("这个价格不值。", "{price}买的，感觉被坑了。")},
}
# Strongly negative: dead on arrival, returns, refunds.
RETURNS = {
    "en": ("DOA - wouldn't even power on. Returned it.", "Returned it after {days} days.",
           "Sent it back for a refund, the second one had the same problem.", "Arrived DOA, waiting for my refund."),
    "zh": ("到手就是坏的，直接退货了。", "用了{days}天就退货了。", "换了一台还是一样的问题，已经申请退款。",
           "开箱就不通电，退货退款中。"),
}

OPENERS = {
    "en": ("Bought this to replace my old {item}.", "Got it on sale for {price}.", "I've had it for {weeks} weeks now.",
           "Bought it as a gift for my dad.", "I did a lot of research before choosing this {item}.",
           "Second {item} from this brand."),
    "zh": ("买来替换家里的旧{item}。", "双十一{price}入手的。", "已经用了{weeks}周了。", "买来送给我爸的。",
           "对比了很多款才选的这台{item}。", "这是我家第二台这个牌子的{item}了。"),
}
CLOSERS = {
    "en": {"pos": ("Would recommend!", "Highly recommend.", "Five stars from me.", "Would buy again."),
           "neg": ("Would not buy again.", "Save your money.", "Avoid.", "Buyer beware."),
           "neutral": ("Will update after a few weeks.", "We'll see how it holds up.", "Not bad, not great."),
           "mixed": ("Three stars for now.", "Decent, but not what I hoped.", "Good, but not great.")},
    "zh": {"pos": ("推荐购买！", "五星好评！", "会回购的。", "值得入手。"),
           "neg": ("差评，大家别买。", "不会再买了。", "避雷！", "劝大家三思。"),
           "neutral": ("用一段时间再来追评。", "先给个中评吧。", "一般般。"),
           "mixed": ("总体还行吧。", "有好有坏，看个人需求。", "中评，希望改进。")},
}
# Lead into the second half of a mixed review, by the tone of that half.
CONNECTORS = {
    "en": {"neg": ("But ", "However, ", "The only downside: ", "On the other hand, "),
           "pos": ("That said, ", "On the plus side, ", "To be fair, ", "On the other hand, ")},
    "zh": {"neg": ("不过", "但是", "唯一不足的是", "缺点是", "就是"),
           "pos": ("不过", "但是", "好在", "优点是", "还好")},
}
UPDATES = {
    "en": ("UPDATE after {weeks} weeks: ", "Edit ({months} months later): ", "Update: "),
    "zh": ("追评：用了{weeks}周，", "【追评】{months}个月后：", "更新一下："),
}

# --- one-liners -----------------------------------------------------------------------------------

SHORT = {
    "en": {"pos": ("Love it!", "Works great", "Perfect.", "Great value, fast shipping.", "Excellent {item}.",
                   "Does the job, love it", "Exactly what I needed."),
           "neg": ("DOA. Returned it.", "Broke after {days} days.", "Junk.", "Don't buy.", "Total waste of money.",
                   "Returned it."),
           "neutral": ("It's ok.", "Fine.", "As described.", "Meh.", "Average."),
           "mixed": ("Good {item}, terrible battery.", "Great sound, awful mic.", "Nice design but feels cheap.",
                     "Works well, shipping was slow.")},
    "zh": {"pos": ("好评！", "物流很快，性价比高。", "很好用，推荐！", "正品，满意。", "好评，下次还来。", "给力！",
                   "东西不错，好评。"),
           "neg": ("差评！", "垃圾，别买。", "到手就坏了，退货。", "用了{days}天就坏了。", "踩雷了。", "无语，退货。"),
           "neutral": ("还行。", "一般般。", "和描述一致。", "中规中矩。", "凑合用吧。"),
           "mixed": ("东西不错，物流太慢。", "好看是好看，就是不好用。", "质量还行，客服太差。", "功能可以，噪音有点大。")},
}
# Positive words, negative meaning (only in 1-2 star reviews).
SARCASM = {
    "en": ("Wow, {days} days before it died. Truly built to last. 🙃",
           "Great, just great. It makes more noise than my neighbour's drill.",
           "Love how it needs a reboot every morning. Perfect for people with too much free time.",
           "Amazing product if you enjoy returning things.",
           "Fantastic, the second one broke too. At least the box was nice.",
           "Best {item} ever... at collecting dust after it stopped working."),
    "zh": ("太棒了，用了{days}天就坏了，真是“耐用”啊🙂", "好评！好到我已经退货了。",
           "客服回复速度堪比蜗牛，真是“贴心”。", "五星推荐给想练习退货流程的朋友。",
           "真是“物超所值”，{price}买了个摆件。", "质量“太好了”，第二台也坏了。"),
}
# Five stars, but the text complains.
FIVE_STAR_COMPLAINTS = {
    "en": ("Giving 5 stars because the seller was nice, but the {item} itself leaks.",
           "5 stars for delivery, but it broke after {days} days.",
           "Rating is for customer service, the product is honestly bad.",
           "Five stars so people read this: it stopped working in week {n}."),
    "zh": ("五星是给客服的，东西本身一般，用了一周就有异响。", "给五星是因为物流快，东西质量真不行，已经坏了。",
           "好评给商家态度，{item}用了{days}天就出问题了。", "五星是为了让大家看到：这个{item}千万别买。"),
}

TITLES = {
    "en": {"pos": ("Love it!", "Great value", "Excellent", "Exactly as described", "Highly recommend",
                   "Best {item} I've owned", "So happy with this"),
           "neg": ("Stopped working after a week", "Do not buy", "Very disappointed", "Returned it",
                   "Waste of money", "Arrived broken"),
           "neutral": ("It's ok", "Does the job", "Average", "First impressions", "As expected"),
           "mixed": ("Good but not great", "Mixed feelings", "Almost perfect", "Great {item}, one big flaw",
                     "Pros and cons"),
           "sarcastic": ("Just perfect 🙃", "Wonderful. Really.", "Great purchase (not)"),
           "complaint": ("5 stars for the seller", "Read before you buy", "Good service, bad product")},
    "zh": {"pos": ("好评！", "性价比很高", "非常满意", "和描述一致", "推荐购买", "好用！", "值得入手"),
           "neg": ("差评", "踩雷了", "质量太差", "已退货", "别买", "到手就坏"),
           "neutral": ("还行吧", "一般般", "中规中矩", "先评价一下", "凑合"),
           "mixed": ("有好有坏", "优缺点都很明显", "还可以，但有问题", "中评", "差一点就完美了"),
           "sarcastic": ("真是太“好”了", "“好评”", "绝了"),
           "complaint": ("五星给客服", "大家看一下再买", "服务好，东西不行")},
}

# --- emoji ----------------------------------------------------------------------------------------

EMOJI = {
    "pos": ("👍", "😍", "❤️", "🎉", "✨", "👌", "🥰", "💯", "🔥"),
    "neg": ("😡", "👎", "😤", "🤬", "😞", "🙄", "💩", "😭"),
    "neutral": ("🤔", "😐", "🙂"),
}
# Whole bodies made only of emoji (one per day, on purpose).
EMOJI_ONLY = {
    "pos": ("👍👍👍", "❤️❤️❤️", "😍🔥💯", "👌👌", "🥰🥰🥰🥰", "💯💯💯"),
    "neg": ("😡😡😡", "👎👎", "💩💩💩", "🤬👎", "😭😭😭"),
    "neutral": ("🤔", "😐😐", "🙂"),
}

# --- the very long review (a usage diary) ---------------------------------------------------------

LONG_TITLES = {
    "en": ("Long-term review after {months} months (very detailed)", "Everything you need to know before buying",
           "My honest {months}-month diary with this {item}"),
    "zh": ("【长评】使用{months}个月后的真实感受", "买之前一定要看的超详细测评", "{item}深度体验{months}个月，说点真心话"),
}
LONG_INTROS = {
    "en": ("I don't usually write reviews, but I promised myself I would keep a diary with this {item} because the "
           "reviews I found before buying were all either one line or obviously paid. So here it is, day by day. "
           "Sorry in advance, it is long.",),
    "zh": ("平时很少写评价，但买之前看到的评价要么就一句话，要么一看就是刷的，所以我决定把这台{item}的使用情况按天记下来，"
           "给后来的人参考。提前说一声，很长。",),
}
# {days} is the diary's running day count here.
DIARY_HEADINGS = {"en": ("Day {days}:", "Day {days} -"), "zh": ("第{days}天：", "【第{days}天】")}
# Diary entries mix these with the category's aspect sentences.
DIARY_NOTES = {
    "en": ("Used it {n} times today without any issues.", "Cleaned it properly for the first time, took about {minutes} minutes.",
           "Nothing new to report.", "Installed a firmware update this morning.", "My partner used it today and didn't complain.",
           "Took it with me on a weekend trip.", "Compared it side by side with a friend's {item}.",
           "Read the manual properly for the first time and found a setting I had missed.",
           "Asked support a question, got an answer the next day.", "Still looks new.",
           "Noticed a small scratch on the side, probably my fault.", "Barely used it this week, busy at work."),
    "zh": ("今天用了{n}次，没什么问题。", "第一次认真清洁了一下，花了大概{minutes}分钟。", "没什么新情况。", "早上升级了一下固件。",
           "家里人今天也用了，没说什么。", "周末出门带上了。", "和朋友家的{item}放在一起对比了一下。",
           "认真看了一遍说明书，发现之前漏掉了一个设置。", "问了客服一个问题，第二天才回复。", "看起来还是新的。",
           "侧面有一道小划痕，可能是我自己弄的。", "这周工作忙，基本没怎么用。"),
}
LONG_VERDICTS = {
    "en": ("Verdict: it has real strengths and real flaws. If you can live with the flaws, it is a decent buy at {price}; "
           "if not, keep looking.",),
    "zh": ("总结：优点和缺点都很明显。如果能接受这些缺点，{price}的价格还算可以；如果接受不了，建议再看看别的。",),
}
