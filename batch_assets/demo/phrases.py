"""Text bank for the demo support-ticket generator (``seed.py``): vocabularies and templates only.

Templates are ``str.format_map`` strings; the slot names they may use are the keys produced by
``seed._slots`` (product, plan, plan2, amount, amount2, order, invoice, error, http, device, os,
browser, version, date, endpoint, seconds, n, files, seats, sso, country, company, tax_id, last4,
feature). No template outside the ``PII_*`` lists may contain an e-mail address, a phone number or a
long digit run: the sensitive-data share of the demo table is controlled by the generator alone.
"""

THEMES = ("billing", "technical", "account")

# --- slot vocabularies -------------------------------------------------------------------------

PRODUCTS = (
    "Lumen Docs", "Lumen Sheets", "Lumen Drive", "Lumen Meet", "Lumen CRM",
    "Lumen Analytics", "Lumen Forms", "Lumen Desk", "Lumen Mail", "Lumen API",
)
PLANS = {
    "en": ("Free", "Starter", "Pro", "Business", "Enterprise", "Team"),
    "zh": ("免费版", "基础版", "专业版", "商业版", "企业版", "团队版"),
}
PRICES = {
    "en": (9.99, 12.0, 19.0, 29.0, 49.0, 99.0, 149.0, 249.0, 588.0, 1188.0, 2376.0),
    "zh": (68.0, 98.0, 198.0, 398.0, 699.0, 1288.0, 2399.0, 4999.0, 9800.0),
}
CURRENCIES = {"en": ("$", "$", "$", "€", "£"), "zh": ("¥", "¥", "RMB ")}
ERROR_CODES = (
    "E1042", "E2207", "E3110", "ERR_SYNC_CONFLICT", "SYNC-409", "AUTH-401", "ERR_TOKEN_EXPIRED",
    "ECONNRESET", "ETIMEDOUT", "QUOTA_EXCEEDED", "UPLOAD_CHUNK_MISMATCH", "0x80070005",
)
HTTP_ERRORS = (
    "502 Bad Gateway", "504 Gateway Timeout", "500 Internal Server Error",
    "503 Service Unavailable", "429 Too Many Requests",
)
# Device -> operating systems it can run, so one ticket never pairs an iPad with Android.
DEVICES = {
    "iPhone 15 Pro": ("iOS 18.1", "iOS 17.6"), "iPhone 13": ("iOS 18.1", "iOS 17.6"),
    "iPad Air": ("iPadOS 18.1", "iPadOS 17.7"), "Pixel 8": ("Android 15", "Android 14"),
    "Galaxy S23": ("Android 14", "Android 15"), "Xiaomi 14": ("Android 14", "HyperOS 1.0"),
    "OPPO Find X7": ("Android 14",), "Huawei Mate 60": ("HarmonyOS 4.2",),
    "MacBook Air M2": ("macOS 15.1", "macOS 14.6"), "Surface Pro 9": ("Windows 11 23H2",),
    "ThinkPad X1 Carbon": ("Windows 11 23H2", "Windows 10 22H2", "Ubuntu 24.04"),
    "Dell OptiPlex desktop": ("Windows 10 22H2", "Windows 11 23H2"),
}
BROWSERS = ("Chrome 131", "Safari 18", "Firefox 133", "Edge 131", "Arc", "Opera")
ENDPOINTS = (
    "/v2/documents", "/v2/sync/batch", "/v2/export", "/v1/webhooks", "/v2/search",
    "/v2/files/upload", "/v2/users", "/oauth/token",
)
SSO_PROVIDERS = {
    "en": ("Okta", "Azure AD", "Google Workspace", "OneLogin", "JumpCloud"),
    "zh": ("企业微信", "钉钉", "飞书", "Azure AD", "Okta"),
}
VAT_COUNTRIES = ("Germany", "France", "the Netherlands", "Ireland", "Spain", "Poland", "the UK", "Italy")
COMPANIES = {
    "en": (
        "Acme Logistics", "Northwind Traders", "Brightside Dental", "Harbor & Pine Studio",
        "Kestrel Analytics", "Bluefin Retail", "Oakridge Legal LLP", "Tandem Robotics GmbH",
    ),
    "zh": (
        "上海云帆科技有限公司", "杭州青禾电子商务有限公司", "深圳启明星软件有限公司", "北京博远咨询有限公司",
        "成都锦程物流有限公司", "广州南风文化传媒有限公司", "苏州恒润精密制造有限公司",
    ),
}
FEATURES = {
    "en": (
        "Offline mode", "Calendar sync", "The Slack integration", "CSV export", "Shared folders",
        "Version history", "Webhooks", "Two-way Outlook sync", "The Zapier connector",
    ),
    "zh": ("离线模式", "日历同步", "企业微信集成", "CSV 导出", "共享文件夹", "历史版本", "Webhook", "钉钉通知"),
}

EN_FIRST_NAMES = (
    "James", "Mary", "John", "Patricia", "Robert", "Jennifer", "Michael", "Linda", "David",
    "Elizabeth", "William", "Susan", "Richard", "Jessica", "Thomas", "Sarah", "Daniel", "Karen",
    "Matthew", "Emily", "Anthony", "Olivia", "Mark", "Sophie", "Liam", "Chloé", "Noah", "María",
    "José", "Priya", "Arjun", "Mei", "Oluwaseun", "Fatima", "Søren", "Zoë", "Siobhán", "Lukas",
    "Hannah", "Kenji", "Ana", "Tom", "Grace",
)
EN_LAST_NAMES = (
    "Smith", "Johnson", "Williams", "Brown", "Jones", "Miller", "Davis", "Wilson", "Anderson",
    "Taylor", "Thomas", "Moore", "Martin", "Jackson", "Thompson", "White", "Harris", "Clark",
    "Lewis", "Walker", "O'Brien", "García", "Müller", "Nguyen", "Kowalski", "Okafor", "Patel",
    "Schmidt", "Rossi", "Dubois", "Tanaka", "Andersen", "Fernández", "Murphy", "Cohen", "Khan",
)
# (hanzi, pinyin) pairs so e-mail addresses can be derived from Chinese names.
ZH_SURNAMES = (
    ("王", "wang"), ("李", "li"), ("张", "zhang"), ("刘", "liu"), ("陈", "chen"), ("杨", "yang"),
    ("黄", "huang"), ("赵", "zhao"), ("吴", "wu"), ("周", "zhou"), ("徐", "xu"), ("孙", "sun"),
    ("马", "ma"), ("朱", "zhu"), ("胡", "hu"), ("郭", "guo"), ("何", "he"), ("林", "lin"),
    ("罗", "luo"), ("高", "gao"), ("郑", "zheng"), ("谢", "xie"),
)
ZH_GIVEN_NAMES = (
    ("伟", "wei"), ("芳", "fang"), ("娜", "na"), ("敏", "min"), ("静", "jing"), ("丽", "li"),
    ("强", "qiang"), ("磊", "lei"), ("洋", "yang"), ("艳", "yan"), ("勇", "yong"), ("军", "jun"),
    ("杰", "jie"), ("娟", "juan"), ("涛", "tao"), ("明", "ming"), ("超", "chao"), ("秀英", "xiuying"),
    ("华", "hua"), ("慧", "hui"), ("建国", "jianguo"), ("晓东", "xiaodong"), ("雨桐", "yutong"),
    ("子涵", "zihan"), ("浩然", "haoran"), ("欣怡", "xinyi"), ("思远", "siyuan"), ("佳怡", "jiayi"),
)
EMAIL_DOMAINS = {
    "en": ("example.com", "example.com", "example.com", "example.org", "example.net"),
    "zh": ("example.cn", "example.cn", "example.cn", "example.com"),
}

# --- tickets: (subject variants, problem statement), per language and theme ----------------------
# A subject is picked from its own problem's variants, or (sometimes) from the vague GENERIC_SUBJECTS.

TICKETS = {
    "en": {
        "billing": (
            (("Charged twice this month", "Double charge on {date}"),
             "I was charged twice for my {plan} subscription on {date}. Both charges of {amount} show up on my card ending in {last4}."),
            (("Invoice {invoice} is wrong", "Wrong seat count on invoice"),
             "Our invoice {invoice} shows {amount} but we only have {seats} seats on the {plan} plan. The seat count looks wrong."),
            (("Charged after cancelling trial", "Refund request: trial cancelled"),
             "I cancelled my trial before it ended but was still billed {amount} on {date}. I'd like a full refund."),
            (("Question about prorated upgrade charge", "Upgrade to {plan} charged incorrectly"),
             "We upgraded from {plan2} to {plan} mid-cycle and the prorated charge of {amount} doesn't match what the pricing page says."),
            (("Need our VAT number on the invoice", "Reverse charge missing on {invoice}"),
             "Can you re-issue invoice {invoice} with our VAT number? We are a registered business in {country} and the reverse charge was not applied."),
            (("Downgrade to {plan} not reflected in billing", "Still paying for {plan2}"),
             "I downgraded to {plan} last month, but this month's invoice still charges the {plan2} price of {amount}."),
            (("Refund still not received", "Refund for order {order}"),
             "The refund for order {order} was approved on {date} but it still hasn't arrived. It's been over {n} business days."),
            (("Card declined on renewal", "Renewal failed after updating card"),
             "Our company card was declined when renewing {product}. We updated the card, but the renewal is still marked as failed."),
            (("Where do I find old invoices?", "Invoices for our accountant"),
             "Where can I download past invoices? I need everything since {date} for our accountant."),
            (("Unrecognised charge of {amount}", "Charge I don't recognise"),
             "I see a pending authorization of {amount} from Lumen that I don't recognise, reference {order}. I never placed that order."),
            (("Switch to annual billing", "Monthly to yearly billing"),
             "Please switch us from monthly to annual billing on the {plan} plan and tell me how the remaining days are credited."),
            (("VAT rate incorrect for {country}", "Wrong VAT on {invoice}"),
             "The VAT on invoice {invoice} was calculated at the wrong rate for {country}. Please correct it and send a credit note."),
            (("Billed for removed seats", "Seat count not updated"),
             "We removed {n} users last week but we're still being billed for {seats} seats."),
            (("Add PO number to invoice {invoice}", "PO number missing on invoices"),
             "Our purchase order number has to appear on every invoice, otherwise finance rejects it. Can you add it to {invoice}?"),
            (("Discount not applied", "Promised discount missing"),
             "Your sales team promised a 20% discount when we moved to {plan}, but the invoice shows the full price ({amount})."),
            (("Auto-renewal charged after cancellation", "Charged although auto-renew is off"),
             "Auto-renewal charged {amount} even though I turned it off on {date}. Please refund it and cancel the subscription."),
            (("Payment marked overdue but already paid", "Invoice {invoice} shows overdue"),
             "The billing page says \"payment overdue\" but our bank confirms the transfer for invoice {invoice} went out on {date}."),
            (("Non-profit pricing for {plan}?", "Discount for non-profits"),
             "We're a non-profit. Is there a discount for the {plan} plan? Our current bill is {amount} per month."),
            (("Unexpected price increase", "Renewal price went up"),
             "After the price change our {plan} renewal went from {amount2} to {amount}. Nobody told us about this increase."),
            (("Change billing name to {company}", "Invoice should be addressed to our company"),
             "I need the invoice addressed to {company}, not to my personal name. Can you update {invoice} and all future invoices?"),
            (("Trial converted to paid without warning", "Didn't want a paid plan"),
             "My free trial converted to {plan} automatically and I was charged {amount}. I only wanted to test {product}."),
            (("Paid the same invoice twice", "Duplicate payment for {invoice}"),
             "We paid invoice {invoice} twice by mistake (bank transfer and card). Please refund one of the payments."),
            (("Receipt for order {order}", "No receipt received"),
             "How do I get a receipt for order {order}? The confirmation e-mail never arrived."),
            (("Charged for add-on seats we never used", "{product} add-on on our bill"),
             "We were billed {amount} for {product} add-on seats that nobody on our team ever activated."),
        ),
        "technical": (
            (("{product} crashes when opening large files", "Crash on {device}"),
             "{product} crashes every time I open a file larger than about {files} KB on my {device} ({os})."),
            (("Sync failing with {error}", "Files stuck in pending"),
             "Sync has been failing since {date}. The desktop app shows error {error} and {files} files are stuck in 'pending'."),
            (("API timeouts on {endpoint}", "{endpoint} times out"),
             "The API endpoint {endpoint} keeps timing out after {seconds} seconds. It worked fine until {date}."),
            (("Intermittent {http} errors", "{http} from {endpoint}"),
             "We are getting intermittent HTTP {http} responses from {endpoint}, roughly one in {n} requests."),
            (("Cannot log in on {browser}", "Login page just reloads"),
             "I can't log in on {browser}: after entering my password the page just reloads. It works in a private window."),
            (("App closes right after launch", "Mobile app crashes since {version}"),
             "The mobile app closes immediately after the splash screen on my {device} since updating to version {version}."),
            (("CSV export is empty", "Export from {product} broken"),
             "Exporting to CSV from {product} produces an empty file for anything over {files} rows."),
            (("{feature} not working after update", "{feature} does nothing"),
             "{feature} stopped working after the last update. No error, it just does nothing."),
            (("Web app very slow today", "Everything is slow + {http}"),
             "The web app is extremely slow today. Every page takes 20+ seconds to load and sometimes we get a {http} page."),
            (("Webhooks not delivered since {date}", "Webhook deliveries failing"),
             "Webhooks to our server stopped arriving on {date}. The delivery log shows {error}."),
            (("Search returns nothing", "New documents missing from search"),
             "Search in {product} returns no results for documents created in the last {n} days."),
            (("Upload fails at 99%", "Upload error {error}"),
             "Uploading files to {product} fails at 99% with error {error}."),
            (("Duplicate notifications on {device}", "Too many notifications"),
             "Notifications are duplicated: each comment triggers {n} identical notifications on my {device}."),
            (("High CPU usage in desktop app {version}", "Desktop app eats 100% CPU"),
             "Since version {version} the desktop app uses 100% CPU on {os} even when idle."),
            (("OAuth token refresh error", "Integration broken since maintenance"),
             "Our integration gets {error} when refreshing the OAuth token. It started right after your maintenance on {date}."),
            (("Realtime collaboration broken in {product}", "Changes from colleagues not showing"),
             "Realtime collaboration in {product} is broken: changes from colleagues only appear after a manual refresh."),
            (("Calendar events duplicated", "Calendar sync created duplicates"),
             "The calendar sync duplicated all our events from {date} onwards."),
            (("Dashboard shows 'Failed to load data'", "Charts not loading ({error})"),
             "Dashboard charts in {product} show 'Failed to load data' with code {error}."),
            (("Rate limit hit far too early", "Getting {http} at low volume"),
             "Rate limiting looks wrong: we get {http} after only {n} requests per minute, far below our plan's limit."),
            (("Lost offline edits", "Offline changes overwritten"),
             "Offline edits made on my {device} were overwritten after reconnecting. I lost about an hour of work."),
            (("App freezes when pasting from Excel", "Freeze on paste"),
             "The app on {os} freezes when I paste a table from Excel into {product}."),
            (("Images not loading in {browser}", "Broken images in shared docs"),
             "Images in shared documents don't render in {browser}; the console shows {error}."),
            (("Bulk import stops halfway", "Import of {files} records fails"),
             "A bulk import of {files} records into {product} stops halfway without an error message."),
            (("{product} video keeps dropping", "Calls disconnect every few minutes"),
             "Video calls in {product} drop every few minutes and show 'reconnecting' with error {error}."),
            (("Deleted files come back", "Sync restores deleted files"),
             "Files deleted on my {device} keep coming back after the next sync."),
        ),
        "account": (
            (("Password reset link expired", "Can't reset password"),
             "I can't reset my password. The reset link says it has expired, even when I click it immediately."),
            (("Lost phone - cannot pass 2FA", "Locked out by 2FA"),
             "I lost my phone and can't get my 2FA codes any more. How can I get back into my account?"),
            (("Change login e-mail", "Update the e-mail on my account"),
             "I need to change the login e-mail on my account to my new work address; the old domain is being shut down."),
            (("Delete my account", "Account deletion request"),
             "I want to delete my account and all associated data. Please confirm once it's done."),
            (("SSO with {sso} broken", "SSO login fails: {error}"),
             "Our SSO login via {sso} fails with '{error}' for all users since {date}."),
            (("Account locked", "Unlock e-mail never arrives"),
             "My account got locked after {n} failed login attempts, and the unlock e-mail never arrives."),
            (("Transfer workspace ownership", "Owner left the company"),
             "How do I transfer ownership of our workspace to a colleague? The current owner has left the company."),
            (("2FA codes rejected", "Authenticator codes don't work"),
             "The 2FA codes from my authenticator app are always rejected, although the clock on my {device} is correct."),
            (("Merge two accounts", "I have two accounts"),
             "I have two accounts by accident and want to merge them without losing my {product} files."),
            (("Suspicious login on {date}", "Someone else logged into my account"),
             "Someone logged into my account from a location I don't recognise on {date}. Please help me secure it."),
            (("Remove former admin", "Ex-employee still admin"),
             "Please remove a former employee from our workspace. They're an admin and I can't demote them."),
            (("Password login disabled after SSO", "Users can't log in after enabling {sso}"),
             "After enabling SSO with {sso}, our existing users can't log in with their passwords any more."),
            (("Verification e-mail not received", "Can't activate account"),
             "I never received the verification e-mail when signing up, so I can't activate the account."),
            (("Change my username", "Username still shows old name"),
             "Can I change my username? It still shows my maiden name."),
            (("No admin left on our workspace", "Need admin rights restored"),
             "Our only admin left and nobody has admin rights on the {plan} workspace now."),
            (("Backup codes not working", "2FA recovery codes rejected"),
             "The 2FA backup codes I saved when setting up the account don't work."),
            (("Switch from Google sign-in to password", "Stop using Google login"),
             "I want to switch my login from Google sign-in to a normal password."),
            (("GDPR data export and deletion", "Data subject access request"),
             "Please export all personal data you hold about me (GDPR request) before deleting the account."),
            (("Invitation link invalid", "Can't join {company} workspace"),
             "My invitation link to join the {company} workspace says 'invalid or expired'."),
            (("SCIM provisioning from {sso}", "Users from {sso} not provisioned"),
             "We need SCIM provisioning from {sso}. Users created there don't appear in Lumen."),
            (("New phone number for SMS codes", "Not receiving SMS codes"),
             "I changed my phone number and can no longer receive SMS verification codes."),
            (("Account suspended by mistake", "Why is our account suspended?"),
             "The account shows as 'suspended' but we paid the last invoice, {invoice}."),
            (("Asked for 2FA on every login", "'Remember this device' ignored"),
             "Every time I log in on {browser} I'm asked for 2FA again, even with 'remember this device' ticked."),
        ),
    },
    "zh": {
        "billing": (
            (("重复扣费", "{date}被扣了两次钱"), "{date}续费{plan}时被重复扣费了两次，每次都是{amount}，银行卡尾号{last4}。"),
            (("发票抬头开错了", "发票{invoice}需要重开"), "发票{invoice}上的抬头写错了，应该是{company}，麻烦重新开一张。"),
            (("申请增值税专用发票", "专票怎么开"), "我们需要开具增值税专用发票，税号是{tax_id}，请问在哪里申请？"),
            (("取消试用后仍被扣费", "试用期扣费申请退款"), "试用期还没结束我就取消了，但{date}还是扣了{amount}，请帮忙退款。"),
            (("升级补差价金额不对", "升级{plan}收费有误"), "从{plan2}升级到{plan}后，补差价的金额{amount}和官网写的对不上。"),
            (("降级到{plan}后账单没变", "降级未生效"), "上个月已经降级到{plan}，这个月账单还是按{plan2}收的费。"),
            (("退款迟迟未到账", "申请退款：订单{order}"), "订单{order}的退款{date}就显示已批准，到现在已经{n}个工作日了还没到账。"),
            (("关闭自动续费后仍扣费", "自动续费问题"), "自动续费已经关闭了，为什么还是扣了{amount}？请退款并取消订阅。"),
            (("对公转账后账单仍显示待支付", "已付款但显示未支付"), "对公转账已经付款了，账单{invoice}还是显示“待支付”。"),
            (("席位减少后费用未调整", "席位数不对"), "我们减少了{n}个席位，但是账单还是按{seats}个席位收费。"),
            (("月付改年付", "想换成年付"), "能不能把{plan}的月付改成年付？剩下的天数怎么折算？"),
            (("优惠没有生效", "折扣没给"), "销售答应我们{plan}有八折优惠，可发票上还是原价{amount}。"),
            (("发票金额与实付不符", "发票{invoice}金额错误"), "发票{invoice}的金额和实际支付的{amount}不一致，财务没法报销。"),
            (("电子发票未收到", "补发电子发票"), "电子发票一直没收到，订单号{order}，麻烦补发一下。"),
            (("支付宝付款显示失败", "付款成功但显示失败"), "支付宝付款成功了，但是系统显示支付失败，钱已经扣了{amount}。"),
            (("微信支付重复扣款", "订单{order}扣款两次"), "微信支付扣了两次款，订单{order}，请核实后退回多扣的部分。"),
            (("续费涨价没有通知", "续费价格上涨"), "续费价格从{amount2}涨到了{amount}，事先没有任何通知。"),
            (("同一账单付了两次", "重复付款申请退还"), "同一张账单{invoice}我们不小心付了两次，请退还其中一笔。"),
            (("教育优惠咨询", "学校有优惠吗"), "请问{plan}有没有教育优惠？我们是学校，目前每月{amount}。"),
            (("发票需要加采购单号", "发票补开采购单号"), "发票需要写上我们的采购单号，否则财务不收，{invoice}能补开吗？"),
            (("附加席位被收费", "{product}附加费用疑问"), "{product}的附加席位我们从来没开通过，却被收了{amount}。"),
        ),
        "technical": (
            (("{product}闪退", "打开大文件闪退"), "{product}在{device}（{os}）上一打开就闪退，重装了也没用。"),
            (("同步失败：{error}", "文件一直卡在等待中"), "从{date}开始一直同步失败，客户端提示{error}，有{files}个文件卡在“等待中”。"),
            (("接口{endpoint}超时", "API 超时"), "调用接口{endpoint}经常超时，{seconds}秒后直接断开，{date}之前都是好的。"),
            (("接口偶发{http}", "接口报错{http}"), "接口偶尔返回{http}，大概每{n}个请求就有一个失败。"),
            (("{browser}无法登录", "登录页面一直刷新"), "用{browser}登录时输完密码页面就刷新，进不去，无痕模式可以。"),
            (("App启动即闪退", "升级{version}后闪退"), "手机App升级到{version}后，在{device}上一启动就闪退。"),
            (("CSV导出为空", "导出功能异常"), "{product}导出CSV超过{files}行就是空文件。"),
            (("{feature}更新后失效", "{feature}没反应"), "上次更新以后{feature}完全没反应，也没有报错。"),
            (("网页版非常卡", "页面加载很慢"), "今天网页版特别卡，每个页面都要二十多秒，有时候直接{http}。"),
            (("Webhook收不到", "Webhook投递失败"), "Webhook从{date}起就收不到了，投递日志显示{error}。"),
            (("上传到99%失败", "上传报错{error}"), "上传文件到{product}，到99%就失败，提示{error}。"),
            (("搜索不到新文档", "{product}搜索异常"), "{product}里搜索不到最近{n}天新建的文档。"),
            (("桌面端CPU占用过高", "{version}版本CPU占满"), "桌面端{version}在{os}上空闲时CPU也占满。"),
            (("协作编辑不同步", "看不到同事的修改"), "{product}多人协作编辑时看不到同事的修改，必须手动刷新。"),
            (("日历日程重复", "日历同步出错"), "日历同步把{date}之后的日程全部重复了一遍。"),
            (("报表加载失败", "报表报错{error}"), "报表页面一直显示“数据加载失败”，错误码{error}。"),
            (("离线修改丢失", "联网后修改被覆盖"), "离线时在{device}上的修改，联网后被覆盖了，丢了一个小时的工作。"),
            (("批量导入中断", "导入{files}条数据失败"), "批量导入{files}条数据到{product}，到一半就停了，没有任何提示。"),
            (("视频会议频繁断线", "{product}会议掉线"), "{product}视频会议每隔几分钟就断开，显示“正在重连”，错误{error}。"),
            (("限流阈值异常", "请求频繁返回{http}"), "限流不对，每分钟才{n}个请求就返回{http}了。"),
            (("{device}上同步失败", "删除的文件又出现了"), "在{device}上删掉的文件，下一次同步后又回来了。"),
        ),
        "account": (
            (("重置密码链接过期", "无法重置密码"), "忘记密码了，重置链接一点开就提示已过期。"),
            (("手机丢失无法两步验证", "收不到验证码"), "手机丢了，收不到两步验证码，登录不了账号。"),
            (("修改绑定手机号", "手机号换了"), "我的手机号换了，想修改绑定的手机号，但旧号码已经收不到验证码。"),
            (("账号注销申请", "申请注销账号"), "申请注销账号，并删除所有个人数据，注销完成后请告知。"),
            (("{sso}单点登录失败", "SSO 报错{error}"), "通过{sso}单点登录从{date}开始全部失败，报错{error}。"),
            (("账号被锁定", "解锁邮件收不到"), "密码输错{n}次账号被锁了，解锁邮件一直收不到。"),
            (("工作区所有权转移", "管理员离职了"), "原来的管理员离职了，怎么把工作区的所有权转给我？"),
            (("动态验证码错误", "验证器验证码无效"), "验证器App里的动态码一直提示错误，{device}的时间是对的。"),
            (("两个账号合并", "重复注册了账号"), "不小心注册了两个账号，想合并成一个，{product}里的文件不能丢。"),
            (("异地登录提醒", "账号被盗了？"), "{date}有陌生地点登录了我的账号，请帮忙冻结并检查。"),
            (("修改登录邮箱", "更换账号邮箱"), "想把登录邮箱改成新的工作邮箱，老域名马上要停用了。"),
            (("开通SSO后无法密码登录", "{sso}开通后老用户登不上"), "开通{sso}单点登录以后，老用户用密码登录不了了。"),
            (("收不到验证邮件", "账号无法激活"), "注册后一直没收到验证邮件，账号无法激活。"),
            (("工作区没有管理员", "需要恢复管理员权限"), "工作区里没有管理员了，{plan}的设置都改不了。"),
            (("备用恢复码无效", "恢复码用不了"), "当初保存的备用恢复码也用不了。"),
            (("邀请链接失效", "加入不了{company}工作区"), "邀请链接打开提示“无效或已过期”，加入不了{company}的工作区。"),
            (("账号被误停用", "已付款账号却被停用"), "账号显示被停用，但账单{invoice}我们已经付过了。"),
            (("更换登录方式", "微信登录改密码登录"), "想把微信登录换成账号密码登录，怎么操作？"),
            (("每次都要两步验证", "记住设备无效"), "每次在{browser}登录都要重新做两步验证，勾了“记住此设备”也没用。"),
        ),
    },
}
GENERIC_SUBJECTS = {
    "en": {
        "billing": ("Billing question", "Question about my invoice", "Problem with payment", "Invoice / refund", "Help with billing"),
        "technical": ("Problem with {product}", "Bug report", "Something is broken", "Error in {product}", "Help!", "Not working"),
        "account": ("Account problem", "Can't access my account", "Login issue", "Account question", "Please help"),
    },
    "zh": {
        "billing": ("账单问题", "关于发票", "付款问题", "费用咨询"),
        "technical": ("{product}出问题了", "报错", "故障反馈", "求助", "用不了了"),
        "account": ("账号问题", "登录不了", "账号咨询", "急！进不去账号"),
    },
}

DETAILS = {
    "en": {
        "billing": (
            "We're on the {plan} plan with {seats} seats.", "The charge appeared on {date}.",
            "Invoice number: {invoice}.", "Order reference: {order}.", "The amount in question is {amount}.",
            "Our finance team closes the books at the end of the month, so this is a bit urgent.",
            "I've attached a screenshot of the bank statement.",
            "The billing contact is the account owner, I'm just the admin.",
            "This is the second month in a row this has happened.", "The account is under {company}.",
        ),
        "technical": (
            "I'm on {os}, app version {version}.", "Browser: {browser}.", "Device: {device}.",
            "I already tried clearing the cache and reinstalling.",
            "It happens for everyone on our team, about {seats} people.", "It's reproducible every time.",
            "The status page says all systems operational, but it clearly isn't.",
            "Request IDs are in the attached HAR file.",
            "We rolled back to an older version and it works there.", "It started around {date}.",
        ),
        "account": (
            "The account is registered under {company}.", "I'm the workspace owner on the {plan} plan.",
            "I've tried {n} times in the last hour.", "I'm using {browser} on {os}.",
            "This is blocking our whole team.",
            "I can verify my identity with the last invoice number, {invoice}.",
            "We have {seats} users who can't get in.", "I already checked the spam folder.",
        ),
    },
    "zh": {
        "billing": (
            "我们是{plan}，一共{seats}个席位。", "扣款时间是{date}。", "发票号：{invoice}。", "订单号：{order}。",
            "涉及金额{amount}。", "月底财务要结账，比较着急。", "银行流水截图已经附上。", "公司名称：{company}。",
        ),
        "technical": (
            "系统是{os}，版本{version}。", "浏览器：{browser}。", "设备：{device}。", "已经清过缓存、重装过了。",
            "我们团队{seats}个人都遇到了。", "每次都能复现。", "状态页显示一切正常，但明显有问题。",
            "问题大概从{date}开始。",
        ),
        "account": (
            "账号是以{company}的名义注册的。", "我是{plan}工作区的所有者。", "最近一小时试了{n}次。",
            "用的是{os}上的{browser}。", "整个团队都被卡住了。", "可以提供最近一张发票号{invoice}来验证身份。",
            "已经查过垃圾邮件箱了。",
        ),
    },
}

# --- per-channel framing ---------------------------------------------------------------------

GREETINGS = {
    "en": ("Hi,", "Hello,", "Hi there,", "Hello support team,", "Dear Lumen Support,", "Good morning,",
           "Hey team,", "To whom it may concern,", ""),
    "zh": ("你好，", "您好，", "客服你好：", "Lumen 客服您好，", "你好！", "打扰一下，", ""),
}
ASKS = {
    "en": ("Can you please look into this?", "Please advise.", "Could you fix this as soon as possible?",
           "What are the next steps?", "Please get back to me today if possible, this is blocking us.",
           "Is this a known issue?", "Let me know if you need anything else from me.",
           "I'd appreciate a quick reply."),
    "zh": ("麻烦尽快处理一下。", "请问怎么解决？", "急，谢谢！", "请帮忙看一下是什么原因。", "麻烦给个处理时间。",
           "这是已知问题吗？", "需要什么资料我可以补充。"),
}
CLOSINGS = {
    "en": ("Thanks,", "Thank you,", "Best regards,", "Kind regards,", "Cheers,", "Thanks in advance,", "Regards,"),
    "zh": ("谢谢！", "多谢。", "辛苦了。", "谢谢，期待回复。", "感谢！"),
}
CHAT_OPENERS = {
    "en": ("hi", "hello?", "hey", "hi, quick question", "Hi there", "hello, anyone around?"),
    "zh": ("在吗？", "你好", "人工客服", "您好，请问一下", "转人工"),
}
AGENT_NOTES = {
    "en": ("Agent: Verified the account and escalated to tier 2.",
           "Agent: Asked the customer to send screenshots by e-mail.",
           "Agent: Explained the policy; customer wants a written reply.",
           "Agent: Could not reproduce during the call; follow-up scheduled.",
           "Agent: Customer was upset, promised a callback within 24h.",
           "Agent: Created an internal ticket for the engineering team."),
    "zh": ("客服：已核实账号，升级至二线处理。", "客服：请客户通过邮件补充截图。", "客服：已说明政策，客户要求书面回复。",
           "客服：通话中未能复现，已约定回访。", "客服：客户情绪较急，承诺24小时内回电。", "客服：已为技术团队创建内部工单。"),
}
# Web-form framing; {problem} is the already-filled problem statement.
WEB_FORMS = {
    "en": ("Product: {product}\nPlan: {plan}\nMessage:\n{problem}",
           "Topic: {product}\nDescribe your issue:\n{problem}",
           "{problem}"),
    "zh": ("产品：{product}\n套餐：{plan}\n问题描述：\n{problem}",
           "问题类型：{product}\n详细描述：\n{problem}",
           "{problem}"),
}
PHONE_HEADERS = {"en": "Call summary ({minutes} min)\nCustomer: ", "zh": "电话记录（{minutes}分钟）\n客户："}
SUBJECT_PREFIXES = {
    "en": ("Re: ", "URGENT: ", "[{product}] ", "Fwd: "),
    "zh": ("回复：", "【紧急】", "【{product}】"),
}
# Appended to the second copy of a double-submitted web form.
RESUBMIT_NOTES = {
    "en": ("(Sending this again, the form showed an error the first time.)",
           "EDIT: forgot to add: {detail}",
           "Resubmitting, not sure the first one went through."),
    "zh": ("（重复提交：第一次提交时页面报错了。）", "补充一下：{detail}", "不确定上一条有没有提交成功，再发一次。"),
}

# --- deliberate personal data (the only templates allowed to carry it) ---------------------------

PII_EMAIL = {
    "en": ("Please reply to my personal address {pii_email}, I can't access my work inbox right now.",
           "You can also reach my colleague at {pii_email}.",
           "Please cc our accountant, {pii_email}, on your reply.",
           "My old login was {pii_email}, in case you need to look it up.",
           "Send the corrected documents to {pii_email}, please."),
    "zh": ("请回复到我的私人邮箱 {pii_email}，公司邮箱暂时登不上。", "也可以联系我同事：{pii_email}。",
           "处理结果请发到 {pii_email}。", "我以前的登录账号是 {pii_email}。"),
}
PII_PHONE = {
    "en": ("If it's easier, call me on {pii_phone}.", "My mobile is {pii_phone}, I'm available until 6pm.",
           "You can text me at {pii_phone} for the verification.", "Our IT admin can be reached at {pii_phone}."),
    "zh": ("方便的话直接打我电话 {pii_phone}。", "我的手机号是 {pii_phone}，下午六点前都在。",
           "有问题可以加微信，手机号同 {pii_phone}。", "我们IT负责人的电话：{pii_phone}。"),
}
PII_CARD = {
    "en": ("I paid with the card {pii_card}, exp 09/28. Can you check the payment on your side?",
           "The charge went to card number {pii_card}."),
    "zh": ("付款用的是卡号 {pii_card}，麻烦核对一下。", "扣款的银行卡号是 {pii_card}。"),
}

# --- JSON/SQL-escaping hazards ----------------------------------------------------------------
# Every template carries all hazards at once: a ZWJ emoji sequence, an RTL mark, a combining accent,
# a plain emoji, double quotes, backslashes, a tab and newlines.

COMBINING_NAMES = ("Jose\u0301", "Zoe\u0308", "Ame\u0301lie", "Rene\u0301e", "Bjo\u0308rn", "Nguye\u0302\u0303n Va\u0306n An")
ZWJ_EMOJI = ("👩\u200d💻", "👨\u200d👩\u200d👧", "🧑\u200d🔧", "🏳️\u200d🌈", "👨🏽\u200d💻")
EMOJI = ("😡", "🙏", "😅", "🔥", "👍🏽", "🤯", "😭")
RTL_TEXT = ("مكتب دبي", "شركة الأمل", "סניף תל אביב")
WINDOWS_USERS = ("lihua", "jsmith", "admin", "office-pc", "wei.z", "marketing01")
FILE_NAMES = ("Q4 budget (final).xlsx", "contract_v2 copy.docx", "team photo.png", "export 2026.csv", "notes #3.txt")
HAZARDS = {
    "en": (
        "{greeting}\n\n{problem}\n\nMy colleague {combining_name} {zwj_emoji} copied this from the error dialog:\n"
        "\"{error}: cannot open 'C:\\Users\\{user}\\AppData\\Roaming\\Lumen\\cache\\{file}'\"\n\n"
        "Exported status table:\nfile\tstatus\tsize\n{file}\tfailed\t{kb} KB\n\n"
        "Our branch \u200f{rtl_text}\u200f sees the same thing {emoji}\n\n{closing}\n{name}",
        "{emoji}{emoji} seriously?? {problem}\nThe app says \"path not found: \\\\fileserver\\shared\\{file}\" "
        "and then \"retry\\n\" literally, with the backslash.\nname on the account: {combining_name} {zwj_emoji}\n"
        "col1\tcol2\n\u200f{rtl_text}\u200f\tok",
        "{greeting}\n\n{problem} Here is the payload our script sends (it worked last week):\n"
        "{{\"name\": \"{combining_name}\", \"note\": \"line1\\nline2\\ttabbed\", \"path\": \"C:\\\\temp\\\\{file}\", "
        "\"team\": \"\u200f{rtl_text}\u200f\", \"mood\": \"{zwj_emoji}\"}}\n\n"
        "and the raw TSV row:\n{file}\t{kb}\t\"quoted, with comma\"\n\n{closing} {emoji}\n{name}",
    ),
    "zh": (
        "{greeting}\n{problem}\n\n同事 {combining_name} {zwj_emoji} 截下来的报错：\n"
        "“{error}”：无法打开 \"C:\\Users\\{user}\\Documents\\{file}\"\n\n"
        "导出的状态表：\n文件\t状态\t大小\n{file}\t失败\t{kb} KB\n\n迪拜分公司 \u200f{rtl_text}\u200f 也一样 {emoji}\n\n{closing}",
        "{emoji}{emoji} 又来了！{problem}\n提示 \"路径不存在：\\\\nas\\共享\\{file}\"，后面还跟着 \"\\n\" 字样。\n"
        "账号名：{combining_name} {zwj_emoji}\n列1\t列2\n\u200f{rtl_text}\u200f\t正常",
        "{greeting}{problem}我们脚本发的请求体如下（上周还正常）：\n"
        "{{\"name\": \"{combining_name}\", \"备注\": \"第一行\\n第二行\\t缩进\", \"path\": \"D:\\\\导出\\\\{file}\", "
        "\"team\": \"\u200f{rtl_text}\u200f\", \"mood\": \"{zwj_emoji}\"}}\n\n原始 TSV：\n{file}\t{kb}\t\"带引号, 有逗号\"\n\n{closing}{emoji}",
    ),
}

# --- pasted dumps for the very long bodies ------------------------------------------------------

LONG_INTROS = {
    "en": ("Full log below, sorry for the wall of text:", "Pasting the complete log from the desktop app:",
           "Here's everything the API returned before it failed, copied in full:"),
    "zh": ("下面是完整日志，有点长：", "把客户端的完整日志贴在下面：", "这是接口失败前返回的全部内容："),
}
LONG_OUTROS = {
    "en": ("Anything else you need?", "Sorry for the long paste.", "Please escalate, this is urgent."),
    "zh": ("还需要什么信息请告诉我。", "日志太长了，不好意思。", "麻烦尽快升级处理。"),
}
LOG_COMPONENTS = ("sync", "http", "db", "auth", "watcher", "uploader", "scheduler", "ui")
LOG_MESSAGES = (
    "uploading chunk {a}/{b} of \"{file}\" ({kb} KB)",
    "POST {endpoint} -> {status} in {ms} ms (request_id={rid})",
    "GET {endpoint} -> {status} in {ms} ms (request_id={rid})",
    "retrying after timeout (attempt {attempt}/5, backoff {ms} ms)",
    "checkpoint complete, {a} pages written",
    "token refreshed, expires_in=3600",
    "change detected in \"{file}\"",
    "conflict on \"{file}\": {error}",
    "queue depth={a}, in_flight={b}",
)
# Printed without a timestamp under ERROR lines, as Node-style stack traces are.
LOG_STACK_FRAMES = (
    "    at SyncWorker.flush (sync/worker.js:{a}:{b})",
    "    at UploadQueue.next (upload/queue.js:{a}:{b})",
    "    at HttpClient.request (net/http.js:{a}:{b})",
    "    at async Promise.all (index {b})",
    "    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)",
)
