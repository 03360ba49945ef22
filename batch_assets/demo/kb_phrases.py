"""Text bank for the demo knowledge-base generator (``seed_kb.py``): Markdown building blocks only.

Templates are ``str.format_map`` strings; the slot names they may use are the keys produced by
``seed_kb._slots`` (product, plan, plan2, sso, os, device, browser, version, error, http, endpoint,
seconds, n, days, country). Literal braces (JSON in code blocks) are doubled. Titles may use
{product} and {sso} only: those two are fixed per article, the other slots may change with an edit.

Per language and topic an article is assembled from: a title, an intro, one or two numbered
procedures, optional topic sections, a "Troubleshooting" section of (symptom, fix) pairs, and
optional generic sections, in that order (see ``seed_kb._article_body``).
"""

from batch_assets.demo.phrases import PRODUCTS

FAMILIES = {
    "billing": ("invoices", "refunds", "vat", "plan_changes"),
    "technical": ("sync_errors", "api_timeouts", "sso_setup", "mobile_crashes"),
    "account": ("password_reset", "two_factor", "delete_account", "change_contact"),
}
TOPIC_FAMILY = {topic: family for family, topics in FAMILIES.items() for topic in topics}

# Which products an article of a topic can be filed under (the ticket generator's product names).
_ALL = PRODUCTS
TOPIC_PRODUCTS = {
    "invoices": _ALL, "refunds": _ALL, "vat": _ALL, "plan_changes": _ALL,
    "sync_errors": ("Lumen Drive", "Lumen Docs", "Lumen Sheets", "Lumen Mail", "Lumen CRM"),
    "api_timeouts": ("Lumen API", "Lumen API", "Lumen API", "Lumen CRM", "Lumen Analytics", "Lumen Desk"),
    "sso_setup": _ALL,
    "mobile_crashes": ("Lumen Docs", "Lumen Sheets", "Lumen Drive", "Lumen Meet", "Lumen Mail", "Lumen Desk"),
    "password_reset": _ALL, "two_factor": _ALL, "delete_account": _ALL, "change_contact": _ALL,
}
TOPIC_WEIGHTS = {
    "invoices": 9, "refunds": 9, "vat": 6, "plan_changes": 8,
    "sync_errors": 11, "api_timeouts": 8, "sso_setup": 8, "mobile_crashes": 9,
    "password_reset": 10, "two_factor": 9, "delete_account": 6, "change_contact": 7,
}
# The {country} slot in Chinese articles (the English ones use phrases.VAT_COUNTRIES).
VAT_COUNTRIES_ZH = ("德国", "法国", "荷兰", "爱尔兰", "西班牙", "波兰", "英国", "意大利")

# --- per topic: titles, intros, procedures (heading, steps), sections (heading, text), troubleshooting ---

ARTICLES = {
    "en": {
        "invoices": {
            "titles": ("Download and share invoices for {product}", "Where to find your invoices and receipts",
                       "Change the company details on your {product} invoices"),
            "intros": (
                "Every payment you make for {product} comes with an invoice. Invoices are created on the day a "
                "charge is attempted and stay available for as long as your workspace exists, even after you "
                "downgrade or cancel. This article explains where to find them, how to download them as PDF and "
                "how to change the company details printed on them.",
                "Your finance team probably needs a copy of every invoice we issue. You don't have to ask support "
                "for them: workspace owners and billing admins can download any invoice themselves, have invoices "
                "sent to an accounting inbox automatically, and correct the billing address before the next charge.",
            ),
            "procedures": (
                ("Download an invoice", (
                    "Sign in with an account that has the **Owner** or **Billing admin** role.",
                    "Click your avatar in the top-right corner and choose **Settings → Billing**.",
                    "Open the **Invoices** tab. Invoices are listed newest first; use the date filter to find older ones.",
                    "Click the invoice number (it starts with `INV-`) to open a preview.",
                    "Click **Download PDF**. To get several invoices at once, tick their checkboxes and choose "
                    "**Download as ZIP**.",
                )),
                ("Change the details printed on future invoices", (
                    "Go to **Settings → Billing → Billing details**.",
                    "Update the company name, the address or the purchase order number. The PO field accepts up "
                    "to 40 characters.",
                    "Under **Invoice recipients**, add the address of your accounting team if invoices should be "
                    "sent to them as well.",
                    "Click **Save**. The new details are printed on every invoice created from now on.",
                    "If an invoice that was already issued needs the new details, open it and choose **Request "
                    "corrected invoice**. The corrected copy usually arrives within {n} business days.",
                )),
            ),
            "sections": (
                ("Who can see invoices",
                 "Only workspace owners and members with the **Billing admin** role can open the Billing page. "
                 "Regular members see the name of the plan but not prices or invoices. If nobody in your company "
                 "has access any more, a workspace owner can assign the role under **Settings → Members**."),
                ("Invoices and receipts",
                 "An invoice is created when a charge is attempted; a receipt is created when the payment "
                 "succeeds. For card payments both usually appear within seconds of each other. For bank "
                 "transfers on the {plan} plan the receipt follows once the transfer has been matched, which can "
                 "take up to {days} days."),
                ("Currency and language",
                 "Invoices are issued in the currency of your subscription and in the language of the workspace "
                 "owner's account. Changing the display language later does not change invoices that were "
                 "already issued, and we cannot re-issue an invoice in a different currency."),
            ),
            "troubleshooting": (
                ("The Invoices tab is empty.",
                 "You are probably signed in to a different workspace than the one that pays for {product}. Use "
                 "the workspace switcher in the sidebar and check again. Workspaces on the Free plan have no "
                 "invoices."),
                ("The PDF doesn't download.",
                 "Some browser extensions block downloads that open in a new tab. Allow pop-ups for Lumen in "
                 "{browser}, or right-click the invoice number and choose **Save link as**."),
                ("The invoice shows my personal name instead of the company.",
                 "The company name was empty when the invoice was created. Fill it in under **Billing details**, "
                 "then use **Request corrected invoice** on the affected invoices."),
                ("An invoice is missing for one month.",
                 "If the charge failed and was retried, the invoice is dated on the day of the successful retry, "
                 "so it may be listed under the following month."),
                ("Our accounting inbox never receives invoices.",
                 "Check that the address under **Invoice recipients** is spelled correctly and that your mail "
                 "filter accepts PDF attachments. Invoices are sent from our billing system, not from your "
                 "account manager."),
                ("The amounts don't match what our bank shows.",
                 "Banks sometimes add a foreign-transaction fee or convert the amount at their own rate. The "
                 "invoice always shows the amount we charged, in the currency of the subscription."),
            ),
        },
        "refunds": {
            "titles": ("How to request a refund for {product}", "Refund policy and how refunds are processed",
                       "Check the status of a refund"),
            "intros": (
                "If you were charged for something you didn't mean to buy, you can usually get your money back. "
                "Monthly plans can be refunded within 14 days of a charge and annual plans within 30 days. This "
                "article shows how to request a refund for {product} and how long it takes for the money to "
                "reach your account.",
                "Refunds are handled by our billing team and are paid back to the original payment method. Most "
                "requests are approved automatically; a few need a short review, for example when the workspace "
                "has been used heavily since the charge.",
            ),
            "procedures": (
                ("Request a refund", (
                    "Open **Settings → Billing → Invoices**.",
                    "Find the invoice you want refunded and click **⋯ → Request refund**.",
                    "Choose a reason. If you select *Charged by mistake* or *Duplicate charge*, the request is "
                    "usually approved immediately.",
                    "Choose whether to cancel the subscription at the same time. If you keep it, only the charge "
                    "is refunded and the plan stays active until the end of the period.",
                    "Click **Submit request**. You receive a confirmation with a reference that starts with `RF-`.",
                )),
                ("Track a refund", (
                    "Go to **Settings → Billing → Refunds**.",
                    "Each request shows one of three states: *Requested*, *Approved* or *Paid out*.",
                    "Once a refund is *Paid out*, it can take {n} to 10 business days until your bank shows it.",
                    "If a refund stays in *Requested* for more than {days} days, reply to the confirmation message "
                    "so that a billing specialist can review it.",
                )),
            ),
            "sections": (
                ("What can't be refunded",
                 "Add-ons that were used during the period (for example extra storage that holds files), charges "
                 "older than the refund window, and purchases made through the App Store or Google Play. Mobile "
                 "store purchases have to be refunded by Apple or Google."),
                ("Partial refunds",
                 "When you remove seats or downgrade from {plan2} to {plan} in the middle of a period, you don't "
                 "get a refund; the unused amount is added as credit to your account and used for the next "
                 "invoices."),
                ("Refunds and cancellation",
                 "A refund doesn't delete anything. If you also cancel, the workspace switches to the Free plan at "
                 "the end of the period and keeps your data, within the Free plan's limits."),
            ),
            "troubleshooting": (
                ("The **Request refund** option is greyed out.",
                 "The charge is outside the refund window, or it was paid by bank transfer. For bank transfers, "
                 "contact billing support with the invoice number and your bank details."),
                ("The refund was approved but I don't see the money.",
                 "Card refunds can take up to 10 business days depending on your bank. Ask your bank to search for "
                 "the refund using the reference on the confirmation."),
                ("My card has expired since the payment.",
                 "Refunds to an expired or replaced card are normally forwarded to the new card by the bank. If the "
                 "account was closed, the bank returns the money to us and we contact you for other details."),
                ("I was charged twice.",
                 "A pending authorization sometimes looks like a second charge. Wait {days} days: if the second "
                 "entry doesn't disappear, request a refund with the reason *Duplicate charge*."),
                ("The refund amount is lower than the charge.",
                 "If your plan included credit from an earlier downgrade, that credit is restored to your account "
                 "instead of being paid out."),
            ),
        },
        "vat": {
            "titles": ("VAT, GST and sales tax on your {product} invoices", "Add a VAT number to your account",
                       "Why was VAT charged on my invoice?"),
            "intros": (
                "Depending on where your business is registered, we have to add VAT, GST or sales tax to your "
                "subscription. Business customers in the EU and the UK who provide a valid VAT number are "
                "invoiced under the reverse-charge mechanism, so no VAT is added. This article explains how tax "
                "is calculated and how to add or change your tax number.",
                "The tax on an invoice depends on the billing address and on whether we have a valid tax number "
                "for your business. If you are a registered business in {country}, adding your VAT number before "
                "the next renewal makes sure future invoices are issued without VAT.",
            ),
            "procedures": (
                ("Add or change your VAT number", (
                    "Go to **Settings → Billing → Billing details**.",
                    "Check that the billing country is correct. The tax number is validated against the country, "
                    "so change the country first if needed.",
                    "Enter the VAT number including the country prefix, for example `DE123456789`.",
                    "Click **Validate and save**. We check the number against the official VIES or HMRC register; "
                    "this usually takes a few seconds.",
                    "From the next invoice on, the reverse-charge note is printed and no VAT is added.",
                )),
                ("Get VAT refunded on a past invoice", (
                    "Add and validate your VAT number as described above.",
                    "Open the invoice in **Billing → Invoices** and choose **Request tax correction**.",
                    "We issue a credit note for the VAT amount and a corrected invoice. The VAT is refunded to the "
                    "original payment method.",
                    "Corrections are only possible for invoices from the last {n} months.",
                )),
            ),
            "sections": (
                ("How the rate is chosen",
                 "For consumers and for businesses without a valid number, we apply the VAT rate of the billing "
                 "country. The rate is shown next to the tax line on each invoice. In the US, sales tax depends "
                 "on the state and sometimes the city of the billing address."),
                ("Tax-exempt organisations",
                 "Charities, schools and public bodies that are exempt from tax can upload an exemption "
                 "certificate under **Billing details → Tax exemption**. The certificate is reviewed within two "
                 "business days."),
            ),
            "troubleshooting": (
                ("The VAT number is rejected as invalid.",
                 "Make sure the number is entered without spaces and with the country prefix. The official "
                 "register is sometimes unavailable; if validation fails with a timeout, try again later."),
                ("VAT is still charged after adding the number.",
                 "Only invoices created after the number was validated are affected. Use **Request tax "
                 "correction** for invoices that were issued before."),
                ("The billing country can't be changed.",
                 "The country is locked while an invoice is unpaid. Pay or cancel the open invoice first, then "
                 "change the country."),
                ("Our accountant needs the reverse-charge wording.",
                 "Invoices for validated business customers include the sentence *Reverse charge: VAT to be "
                 "accounted for by the recipient*. If it is missing, the number was not validated when the "
                 "invoice was created."),
                ("We are registered in {country} but invoiced from another entity.",
                 "Invoices are issued by the Lumen entity responsible for your region; the issuing entity is "
                 "printed in the header of each invoice."),
            ),
        },
        "plan_changes": {
            "titles": ("Upgrade, downgrade or switch your {product} plan", "Change from monthly to annual billing",
                       "What happens when you change plans"),
            "intros": (
                "You can change your plan at any time. Upgrades take effect immediately and are prorated, so you "
                "only pay the difference for the rest of the current period. Downgrades take effect at the end of "
                "the period, and you keep the features of your current plan until then.",
                "Moving from {plan2} to {plan}, adding seats or switching to annual billing are all done from the "
                "Billing page. This article walks through each change and explains how it shows up on your next "
                "invoice.",
            ),
            "procedures": (
                ("Change your plan", (
                    "Open **Settings → Billing → Plan**.",
                    "Click **Change plan** and select the plan you want. The comparison table shows what you gain "
                    "or lose.",
                    "Review the summary. For upgrades it shows the prorated amount charged today; for downgrades it "
                    "shows the date the change takes effect.",
                    "Click **Confirm**. Upgrades are active within a minute for everyone in the workspace.",
                )),
                ("Switch to annual billing", (
                    "Open **Settings → Billing → Plan** and click **Switch to annual**.",
                    "The remaining days of your monthly period are credited to the first annual invoice.",
                    "Check the number of seats: annual plans are billed for the seats you have when you switch.",
                    "Click **Confirm and pay**. Annual billing saves about two months compared with monthly.",
                    "Seats you add later during the year are charged pro rata on the next monthly true-up.",
                )),
            ),
            "sections": (
                ("Before you downgrade",
                 "Some features are not available on lower plans. When you move to {plan}, shared folders over the "
                 "plan's limit become read-only, and automations that use premium connectors are paused. Nothing "
                 "is deleted, and everything is restored if you upgrade again."),
                ("Seats and billing",
                 "Every active member uses a seat. Guests with view-only access are free. Removing a member frees "
                 "their seat immediately, but the seat count on your invoice changes only at the next renewal."),
                ("Changing plans on mobile",
                 "If you subscribed through the App Store or Google Play, plan changes must be made in the store "
                 "where you subscribed. The Billing page shows which store manages your subscription."),
            ),
            "troubleshooting": (
                ("The **Change plan** button is missing.",
                 "Only owners and billing admins can change plans. Ask an owner to make the change or to give you "
                 "the Billing admin role."),
                ("I downgraded but was charged the old price.",
                 "Downgrades take effect at the end of the current period. The invoice created on the renewal date "
                 "already uses the new price."),
                ("The prorated amount looks wrong.",
                 "Proration is calculated per day and per seat. If you also added seats during the period, those "
                 "are included in the same line. Open the invoice preview for a breakdown."),
                ("Features are still locked after upgrading.",
                 "Members may need to reload the page or restart the desktop app (version {version} or later). "
                 "If a feature is still locked after {n} minutes, sign out and back in."),
                ("I want to go back to monthly billing.",
                 "You can switch back at the end of the annual period. The switch is scheduled from the same page "
                 "and takes effect on the renewal date."),
            ),
        },
        "sync_errors": {
            "titles": ("Fix sync errors in {product}", "Files stuck in \"Pending\" or \"Sync failed\"",
                       "Understanding sync conflicts in {product}"),
            "intros": (
                "The desktop and mobile apps keep a local copy of your files and sync changes in the background. "
                "When something interrupts that, the sync icon turns red and files show *Pending* or *Sync "
                "failed*. Most sync problems are caused by the network, by files that are open in another program, "
                "or by a full disk, and can be fixed in a few minutes.",
                "If a file in {product} doesn't show your latest changes on another device, or the app shows an "
                "error such as `{error}`, work through the steps below in order. Each step fixes a more specific "
                "cause, and you can stop as soon as sync recovers.",
            ),
            "procedures": (
                ("Fix a stuck sync", (
                    "Check the sync icon in the menu bar or system tray. If it shows a pause symbol, click it and "
                    "choose **Resume syncing**.",
                    "Make sure you are online and can open the web app in {browser}.",
                    "Close any program that has the affected files open, such as spreadsheet or image editors.",
                    "Check the free disk space: the app needs at least twice the size of the largest file.",
                    "Open **Preferences → Sync → View activity** to see which files fail and the error shown for each.",
                    "Click **Retry failed items**.",
                    "If files still fail, quit the app completely and start it again.",
                )),
                ("Rebuild the local sync database", (
                    "Quit the desktop app.",
                    "Hold **Shift** while starting the app and choose **Rebuild sync database** when prompted.",
                    "Wait until the app has compared your local files with the cloud. For large folders this can "
                    "take {n} to 30 minutes.",
                    "Files are not re-downloaded unless they differ, and local changes that were not uploaded yet "
                    "are kept.",
                )),
            ),
            "sections": (
                ("How conflicts are handled",
                 "If the same file is changed on two devices before they sync, we keep both versions. The second "
                 "one is saved next to the original with *(conflicted copy)* and the device name in its file name. "
                 "Compare the two and delete the one you don't need."),
                ("Files that are never synced",
                 "Temporary files (for example `~$report.docx`), system files such as `.DS_Store` and "
                 "`desktop.ini`, and files larger than 50 GB are skipped. Path names longer than 260 characters "
                 "can't be synced on {os}."),
                ("Selective sync",
                 "To save disk space, you can choose which folders are kept on a device under **Preferences → Sync "
                 "→ Choose folders**. Folders that are not selected stay in the cloud and are removed from the "
                 "device, not deleted."),
            ),
            "troubleshooting": (
                ("`{error}` appears for a single file.",
                 "The file was changed while it was being uploaded. Save and close it, then click **Retry failed "
                 "items**."),
                ("Sync stops at the same percentage every time.",
                 "A proxy or firewall may be interrupting large uploads. Ask your IT team to allow the Lumen upload "
                 "domains, or switch to another network to confirm."),
                ("Deleted files come back.",
                 "Another device that was offline is still syncing an older state. Open the app on every device "
                 "once so they catch up, then delete the files again."),
                ("Sync is very slow.",
                 "Check **Preferences → Network**: an upload limit may be set. Many small files sync slower than a "
                 "few large ones; zipping folders with thousands of files helps."),
                ("The app says \"Not enough space\" although the disk has space.",
                 "The app measures the space on the drive where the Lumen folder is stored, which may not be your "
                 "main drive. Move the folder under **Preferences → Sync → Location**."),
                ("Files show a red cross on {os}.",
                 "The app has lost permission to the folder. Grant full disk access in the system settings and "
                 "restart the app."),
            ),
        },
        "api_timeouts": {
            "titles": ("Handle timeouts and 5xx errors from the {product}", "Why do API requests time out?",
                       "Rate limits, retries and timeouts"),
            "intros": (
                "Requests to the Lumen API normally complete in well under a second. Requests that read or write "
                "many records, such as exports or batch updates, can take longer and may hit the gateway timeout of "
                "{seconds} seconds. This article explains how to recognise a timeout, how to retry safely and how "
                "to restructure requests so they don't time out in the first place.",
                "If your integration receives `{http}` responses or your HTTP client gives up waiting, the request "
                "may still have been processed on our side. Use the guidance below to retry without creating "
                "duplicates, and to keep long-running work out of a single request.",
            ),
            "procedures": (
                ("Retry safely", (
                    "Send an `Idempotency-Key` header with every `POST` request. Use a new random value for each "
                    "logical operation and the same value for its retries.",
                    "On `429`, `502`, `503` or `504`, wait before retrying. Start with one second and double the "
                    "wait after each attempt, up to {n} attempts.",
                    "Respect the `Retry-After` header if it is present; it tells you exactly how long to wait.",
                    "Log the `X-Request-Id` response header. Support needs it to look up a failed request.",
                    "Set your client timeout slightly above ours, for example {seconds} seconds plus five.",
                )),
                ("Make large requests smaller", (
                    "Use pagination: request at most 200 items per page with the `limit` parameter and follow the "
                    "`next_cursor` value.",
                    "Replace many single updates with the batch endpoint `{endpoint}`, which accepts up to 500 "
                    "changes per call.",
                    "For exports, start an asynchronous export job and poll its status instead of waiting for the "
                    "whole file in one response.",
                    "Filter on the server with `updated_since` instead of downloading everything and filtering "
                    "locally.",
                )),
            ),
            "sections": (
                ("Example request",
                 "The following request sets a client timeout and an idempotency key:\n\n```bash\n"
                 "curl --max-time {seconds} -X POST \"https://api.lumen.example.com{endpoint}\" \\\n"
                 "  -H \"Authorization: Bearer $LUMEN_TOKEN\" \\\n"
                 "  -H \"Idempotency-Key: 7f3c9a2e-import-42\" \\\n"
                 "  -d '{{\"items\": [], \"dry_run\": true}}'\n```"),
                ("What a timeout response looks like",
                 "When the gateway gives up, you receive status `504` and a body like this:\n\n```json\n"
                 "{{\"error\": {{\"code\": \"gateway_timeout\", \"message\": \"The request took too long\", "
                 "\"retryable\": true}}}}\n```\n\nA `retryable` value of `true` means the request can be "
                 "repeated with the same idempotency key."),
                ("Rate limits",
                 "Each token may send 600 requests per minute on the {plan} plan. Responses include the headers "
                 "`X-RateLimit-Remaining` and `X-RateLimit-Reset`. Spreading requests evenly avoids bursts that "
                 "trigger `429`."),
            ),
            "troubleshooting": (
                ("Only some requests time out.",
                 "Look at what those requests have in common: usually a large page size, a wide date range or a "
                 "search without filters. Reduce the page size first."),
                ("We get `{http}` during the night.",
                 "Scheduled maintenance happens on Sundays between 02:00 and 04:00 UTC and is announced on the "
                 "status page. Retries with backoff ride through it."),
                ("A retried request created a duplicate record.",
                 "The first attempt succeeded although the client timed out. Always send an idempotency key so "
                 "that a retry returns the original result."),
                ("Timeouts started after we upgraded our SDK.",
                 "SDK version {version} lowered the default client timeout. Set the timeout explicitly when "
                 "creating the client."),
                ("Webhook deliveries to our server time out.",
                 "Your endpoint must answer within ten seconds. Acknowledge the webhook immediately with `200` and "
                 "do the processing in the background."),
                ("Every request fails with `ETIMEDOUT`.",
                 "The connection never reached us. Check outbound firewall rules and DNS resolution on the machine "
                 "that runs the integration."),
            ),
        },
        "sso_setup": {
            "titles": ("Set up single sign-on (SSO) with {sso}", "Configure SAML SSO for {product}",
                       "Troubleshoot SSO login problems"),
            "intros": (
                "Single sign-on lets your team sign in to Lumen with the accounts they already use at work. SSO is "
                "available on the Business and Enterprise plans and supports SAML 2.0 with providers such as "
                "{sso}. Setting it up takes about 15 minutes and requires admin access to both Lumen and your "
                "identity provider.",
                "Once SSO is enabled, members sign in through {sso} and their passwords are managed by your "
                "identity provider instead of by Lumen. This article covers the setup, testing it safely and what "
                "to do if people can't sign in afterwards.",
            ),
            "procedures": (
                ("Connect your identity provider", (
                    "In Lumen, go to **Admin console → Security → Single sign-on** and click **Add SAML provider**.",
                    "Copy the **ACS URL** and the **Entity ID** shown on the page.",
                    "In {sso}, create a new SAML application and paste both values.",
                    "Map the user's e-mail address to the `NameID` attribute, using the *EmailAddress* format.",
                    "Download the identity provider metadata XML from {sso} and upload it in Lumen.",
                    "Click **Test connection**. A new window opens, signs you in through {sso} and reports success.",
                    "When the test succeeds, set **SSO enforcement** to *Optional* for a trial period.",
                )),
                ("Enforce SSO for everyone", (
                    "Verify your company's e-mail domain under **Admin console → Domains**.",
                    "Make sure at least one admin can sign in with SSO.",
                    "Set **SSO enforcement** to *Required*. Members who signed in with a password are asked to "
                    "sign in again through SSO.",
                    "Keep the **Break-glass account** enabled so one owner can still sign in if the identity "
                    "provider is down.",
                )),
            ),
            "sections": (
                ("Provisioning users with SCIM",
                 "SSO handles sign-in but does not create accounts in advance. To create and deactivate Lumen "
                 "accounts automatically when people join or leave, enable SCIM provisioning under **Admin console "
                 "→ Security → Provisioning** and paste the SCIM token into {sso}."),
                ("Certificates",
                 "Identity providers rotate their signing certificates, usually every one to three years. Upload "
                 "the new metadata before the old certificate expires, or sign-ins fail with a signature error."),
                ("Guests and contractors",
                 "People outside your verified domains are not affected by SSO enforcement and keep signing in "
                 "with a password and two-step verification."),
            ),
            "troubleshooting": (
                ("Sign-in fails with \"Invalid SAML response\".",
                 "The clock on the identity provider may be off, or the certificate in Lumen is outdated. Upload "
                 "the current metadata XML again."),
                ("Users land on an error page after signing in to {sso}.",
                 "The ACS URL in {sso} doesn't match the one in Lumen exactly. Copy it again; a trailing slash "
                 "makes a difference."),
                ("Some users get \"No account found\".",
                 "The e-mail address sent by {sso} differs from the one in Lumen, for example an alias. Make the "
                 "`NameID` use the primary address, or change the address in Lumen."),
                ("Existing users can't sign in with their password any more.",
                 "That is expected once SSO is *Required*. They should use **Sign in with SSO** and enter their "
                 "work e-mail."),
                ("The test connection window closes without a result.",
                 "Pop-up blockers in {browser} can interrupt the test. Allow pop-ups for the Admin console and run "
                 "the test again."),
                ("Sign-in loops back to the login page.",
                 "Third-party cookies are blocked for the Lumen domain. Allow cookies for Lumen or use the desktop "
                 "app, which is not affected."),
            ),
        },
        "mobile_crashes": {
            "titles": ("{product} mobile app crashes or closes unexpectedly", "Fix crashes in the {product} app",
                       "The mobile app won't open"),
            "intros": (
                "If the {product} app closes right after it starts, freezes on the splash screen or crashes when "
                "you open a particular file, the cause is usually an outdated app version, a damaged local cache "
                "or too little free storage on the device. The steps below fix most crashes without losing any "
                "data, because everything you have synced is stored in the cloud.",
                "Crashes on phones and tablets are often tied to one device model or operating system version. "
                "Before you reinstall the app, try the quick fixes below; if the app still crashes, send us a crash "
                "report so that our mobile team can reproduce the problem on a {device}.",
            ),
            "procedures": (
                ("Quick fixes", (
                    "Update the app to the latest version (currently {version}) from the App Store or Google Play.",
                    "Restart the device. This clears memory that other apps may be holding.",
                    "Make sure at least 1 GB of storage is free.",
                    "Open the app while connected to Wi-Fi, so the first sync doesn't stall on a slow connection.",
                    "If the app crashes on one file only, open the file in the web app instead and let us know "
                    "which file it is.",
                )),
                ("Clear the local cache", (
                    "Open the device settings and go to **Apps → {product}**.",
                    "On Android, tap **Storage → Clear cache**. On iOS, open the app's **Settings → Storage** and "
                    "tap **Clear offline files**.",
                    "Open the app again and sign in if you are asked to.",
                    "Files marked for offline use are downloaded again the next time you are on Wi-Fi.",
                )),
            ),
            "sections": (
                ("Send a crash report",
                 "Open **Settings → Help → Send diagnostics** right after a crash. The report contains the app "
                 "version, the device model ({device}), the operating system ({os}) and the last lines of the app "
                 "log. It doesn't contain the content of your files."),
                ("Supported devices",
                 "The app supports the two most recent major versions of iOS and iPadOS and Android 12 or later. "
                 "On older systems the app may install but is not tested and can crash."),
                ("Unsynced changes",
                 "Changes made offline are stored on the device until they are uploaded. Before you delete and "
                 "reinstall the app, open it once on Wi-Fi and wait until the sync icon shows a check mark."),
            ),
            "troubleshooting": (
                ("The app crashes right after the splash screen.",
                 "This happens when the local database was damaged during an update. Clear the cache as described "
                 "above, or reinstall the app."),
                ("The app crashes only on {os}.",
                 "Check the status page: known issues with new system versions are listed there together with the "
                 "app version that fixes them."),
                ("The app freezes when opening large files.",
                 "Files with thousands of pages or rows may be too large for the device's memory. Open them in the "
                 "web app or on a computer."),
                ("The app closes when I take a photo for an upload.",
                 "Allow camera and photo access for the app in the system settings. Without the permission the "
                 "system closes the app."),
                ("The app crashes after signing in with SSO.",
                 "Update to version {version} or later, which fixes a crash when the identity provider returns a "
                 "very long session token."),
                ("Reinstalling didn't help.",
                 "Send a crash report and include the time of the crash. If the crash report can't be sent, note "
                 "the device model and app version in your message."),
            ),
        },
        "password_reset": {
            "titles": ("Reset your password", "I forgot my {product} password",
                       "Password requirements and how to change your password"),
            "intros": (
                "If you forgot your password, you can set a new one in a couple of minutes with a reset link sent "
                "to your login e-mail. For security reasons, our support team can't see or set passwords for you. "
                "If your company signs in through SSO, your password is managed by your IT team instead.",
                "You can change your password at any time, and you should do so immediately if you think someone "
                "else knows it. Changing the password signs you out of all other devices, except the one you are "
                "using.",
            ),
            "procedures": (
                ("Reset a forgotten password", (
                    "On the sign-in page, click **Forgot password?**.",
                    "Enter the e-mail address you use to sign in and click **Send reset link**.",
                    "Open the message and click **Reset password**. The link is valid for {n} hours and can be "
                    "used once.",
                    "Enter a new password twice and click **Save**.",
                    "Sign in with the new password. If two-step verification is on, you are asked for a code as "
                    "usual.",
                )),
                ("Change your password while signed in", (
                    "Go to **Settings → Account → Security**.",
                    "Click **Change password** and enter your current password.",
                    "Enter the new password twice and click **Update password**.",
                    "Choose whether to sign out of all other devices. We recommend doing so if you changed the "
                    "password because of a security concern.",
                )),
            ),
            "sections": (
                ("Password requirements",
                 "Passwords must be at least 12 characters long. Long passphrases are easier to remember and "
                 "harder to guess than short passwords with symbols. We reject passwords that appear in public "
                 "lists of leaked passwords."),
                ("Accounts that use SSO",
                 "If your company signs in through {sso}, the **Forgot password?** link redirects you to your "
                 "company's sign-in page. Contact your IT team to reset the password there."),
            ),
            "troubleshooting": (
                ("The reset e-mail doesn't arrive.",
                 "Check the spam or junk folder and search for messages from Lumen. Corporate mail filters "
                 "sometimes hold the message for a few minutes. Request a new link only after {n} minutes, because "
                 "each new link invalidates the previous one."),
                ("The reset link says it has expired.",
                 "Some mail security scanners open links before you do, which uses up the link. Request a new link "
                 "and copy it into a private window of {browser}."),
                ("I no longer have access to my login e-mail.",
                 "If your account belongs to a company workspace, an admin can change your login e-mail. For "
                 "personal accounts, contact support and be ready to verify ownership, for example with the last "
                 "invoice number."),
                ("My new password is rejected.",
                 "It is either too short or appears in a list of leaked passwords. Try a longer passphrase made of "
                 "several unrelated words."),
                ("The account is locked after too many attempts.",
                 "Wait 30 minutes, or reset the password, which also unlocks the account."),
            ),
        },
        "two_factor": {
            "titles": ("Turn on two-step verification", "Lost access to your 2FA device",
                       "Use backup codes and security keys with {product}"),
            "intros": (
                "Two-step verification (2FA) protects your account with a second step after the password: a code "
                "from an authenticator app, a text message or a security key. Even if someone learns your password, "
                "they can't sign in without the second step. Admins on the {plan} plan can require 2FA for the "
                "whole workspace.",
                "If you replaced or lost your phone, you can still get into your account with a backup code or a "
                "second method you set up earlier. This article explains how to set up 2FA, how to keep a way back "
                "in, and what to do if you are locked out.",
            ),
            "procedures": (
                ("Set up an authenticator app", (
                    "Go to **Settings → Account → Security → Two-step verification** and click **Turn on**.",
                    "Scan the QR code with an authenticator app on your {device}.",
                    "Enter the six-digit code shown in the app and click **Verify**.",
                    "Download or print the ten backup codes and keep them somewhere safe, away from your phone.",
                    "Optionally add a second method, such as a security key or a phone number for text messages.",
                )),
                ("Sign in when you lost your phone", (
                    "On the sign-in page, enter your e-mail and password as usual.",
                    "On the verification screen, click **Try another way**.",
                    "Choose **Use a backup code** and enter one of your saved codes. Each code works once.",
                    "Once signed in, remove the lost device under **Two-step verification** and set up the new one.",
                    "Generate new backup codes if you have used more than half of them.",
                )),
            ),
            "sections": (
                ("Requiring 2FA for a workspace",
                 "Admins can require 2FA under **Admin console → Security → Two-step verification**. Members who "
                 "haven't set it up are asked to do so the next time they sign in, with a grace period of {days} "
                 "days."),
                ("Text messages",
                 "Codes by text message are convenient but less secure than an authenticator app or a security "
                 "key, because phone numbers can be transferred to another SIM card. Use them as a backup method "
                 "rather than the main one."),
                ("Remembered devices",
                 "When you tick **Remember this device**, you are not asked for a code on that browser for 30 days. "
                 "Clearing cookies or using a private window resets this."),
            ),
            "troubleshooting": (
                ("Codes from the authenticator app are rejected.",
                 "Codes depend on the time. Turn on automatic date and time on your {device}, then try a fresh code."),
                ("I don't receive text messages.",
                 "Text messages can be delayed by the carrier. Wait {n} minutes before requesting another code. "
                 "Roaming and some virtual numbers are not supported."),
                ("I lost my phone and my backup codes.",
                 "If you belong to a company workspace, an admin can reset your 2FA under **Admin console → "
                 "Members**. For personal accounts, support can verify your identity; this takes up to {days} "
                 "business days."),
                ("I'm asked for a code on every sign-in.",
                 "Your browser deletes cookies on exit, so the device isn't remembered. Allow cookies for Lumen in "
                 "{browser}."),
                ("The security key isn't recognised.",
                 "Security keys work in current versions of Chrome, Edge, Firefox and Safari. Try another USB port "
                 "or tap the key when it blinks."),
            ),
        },
        "delete_account": {
            "titles": ("Delete your account", "Close your {product} workspace and delete its data",
                       "What happens to your data when you delete your account"),
            "intros": (
                "You can delete your personal account at any time. Deleting an account is permanent: after a "
                "14-day grace period, your profile, your private files and your settings are erased and can't be "
                "restored. Files you shared in a company workspace belong to that workspace and are kept.",
                "If you no longer need Lumen, you can delete your account yourself. Workspace owners first have to "
                "transfer ownership or close the workspace. This article also explains how to download a copy of "
                "your data before you go.",
            ),
            "procedures": (
                ("Delete your personal account", (
                    "Download anything you want to keep (see *Export your data* below).",
                    "Go to **Settings → Account → Delete account**.",
                    "Read the summary of what will be deleted and enter your password to confirm.",
                    "Click **Delete my account**. You are signed out of all devices.",
                    "You receive a confirmation. Until the grace period ends you can still cancel the deletion by "
                    "signing in again.",
                )),
                ("Export your data", (
                    "Go to **Settings → Account → Your data**.",
                    "Click **Request export** and choose the products to include.",
                    "When the export is ready, usually within {n} hours, you receive a link to a ZIP file.",
                    "The link is valid for seven days. Files keep their folder structure; documents are exported "
                    "in common formats.",
                )),
            ),
            "sections": (
                ("If you own a workspace",
                 "Owners can't delete their account while they own a workspace with other members. Transfer "
                 "ownership under **Admin console → Members** first, or close the workspace, which cancels its "
                 "subscription and deletes its content after the grace period."),
                ("Subscriptions",
                 "Deleting your account cancels a personal subscription at the end of the billing period. "
                 "Subscriptions bought through the App Store or Google Play must be cancelled in the store, "
                 "otherwise the store keeps charging you."),
                ("Data protection requests",
                 "You have the right to receive a copy of your personal data and to have it erased. The export and "
                 "deletion described here cover both. Backups are overwritten within {days} days of the deletion."),
            ),
            "troubleshooting": (
                ("The **Delete account** button is disabled.",
                 "You still own a workspace or have an active subscription that must be cancelled in a mobile "
                 "store. The page tells you which one."),
                ("I deleted my account by mistake.",
                 "Sign in within 14 days and choose **Cancel deletion**. After that the data can't be recovered."),
                ("My account is managed by my company.",
                 "Accounts on a company domain can only be deleted by an admin of that company's workspace."),
                ("The export link has expired.",
                 "Request a new export from the same page. Old exports are removed after seven days."),
                ("I still receive e-mails after deleting.",
                 "Notifications that were already queued can arrive for up to a day. If they continue, use the "
                 "unsubscribe link in the message."),
            ),
        },
        "change_contact": {
            "titles": ("Change the e-mail address or phone number on your account",
                       "Update your login e-mail in {product}", "Change the phone number used for verification"),
            "intros": (
                "Your login e-mail is where we send sign-in links, invoices and security alerts, and your phone "
                "number can be used for two-step verification. Keep both up to date, especially when you change "
                "jobs or phone numbers, so that you don't get locked out.",
                "You can change the e-mail address you sign in with and the phone number on your account from "
                "your security settings. For safety, both changes have to be confirmed on the new address or "
                "number, and we notify the old one.",
            ),
            "procedures": (
                ("Change your login e-mail", (
                    "Go to **Settings → Account → Profile**.",
                    "Next to your e-mail address, click **Change**.",
                    "Enter the new address and your current password.",
                    "Open the confirmation message sent to the new address and click **Confirm address**. The link "
                    "is valid for {n} hours.",
                    "From now on, sign in with the new address. Your files, workspaces and subscriptions are not "
                    "affected.",
                )),
                ("Change your phone number", (
                    "Go to **Settings → Account → Security → Phone number**.",
                    "Click **Edit**, choose the country code and enter the new number.",
                    "Enter the code we text to the new number.",
                    "If the number is used for two-step verification, check that you can still sign in with it "
                    "before removing any other method.",
                )),
            ),
            "sections": (
                ("Company accounts",
                 "If your address is on a domain verified by your company, you can't change it yourself; an admin "
                 "changes it in **Admin console → Members**. This prevents company accounts from being moved to "
                 "private addresses."),
                ("Notification to the old address",
                 "We send a notice to the old address when the e-mail changes. If you didn't make the change, the "
                 "notice contains a link to undo it within {days} days and secure your account."),
            ),
            "troubleshooting": (
                ("\"This address is already in use.\"",
                 "Another account uses that address, perhaps one you created earlier. Sign in to it and delete it "
                 "or change its address first."),
                ("The confirmation message doesn't arrive.",
                 "Check the spam folder of the new address. Some company mail servers reject messages from new "
                 "senders; ask your IT team to allow Lumen."),
                ("I no longer have the old phone number.",
                 "You can change the number with a backup code or another 2FA method. If you have none, follow the "
                 "steps for a lost 2FA device."),
                ("My invoices still go to the old address.",
                 "Invoice recipients are set separately under **Settings → Billing → Billing details**."),
                ("The country code I need isn't listed.",
                 "Text messages aren't available in every country. Use an authenticator app for verification "
                 "instead."),
            ),
        },
    },
    "zh": {
        "invoices": {
            "titles": ("下载和转发{product}发票", "在哪里查看发票和收据", "修改{product}发票上的公司信息"),
            "intros": (
                "每一笔{product}付款都会生成一张发票。发票在扣款当天生成，只要工作区存在就可以随时下载，即使已经降级或取消订阅也不影响。"
                "本文介绍如何查找发票、下载 PDF，以及如何修改发票上的抬头和地址。",
                "财务同事通常需要每一张发票的副本。这些操作无需联系客服：工作区所有者和账单管理员可以自行下载发票、"
                "设置自动发送到财务邮箱，并在下次扣款前修改开票信息。",
            ),
            "procedures": (
                ("下载发票", (
                    "使用拥有**所有者**或**账单管理员**角色的账号登录。",
                    "点击右上角头像，选择**设置 → 账单**。",
                    "打开**发票**标签页。发票按时间倒序排列，可以用日期筛选查找较早的发票。",
                    "点击以 `INV-` 开头的发票号打开预览。",
                    "点击**下载 PDF**。如需一次下载多张，勾选后选择**打包下载**。",
                )),
                ("修改以后发票上的信息", (
                    "进入**设置 → 账单 → 开票信息**。",
                    "修改公司名称（发票抬头）、纳税人识别号、地址或采购单号。",
                    "在**发票接收人**中添加财务邮箱，发票会同时发送给财务。",
                    "点击**保存**。此后生成的所有发票都会使用新信息。",
                    "已经开出的发票如需更正，打开该发票并选择**申请重开**，一般{n}个工作日内完成。",
                )),
            ),
            "sections": (
                ("谁可以查看发票",
                 "只有工作区所有者和账单管理员可以打开账单页面。普通成员只能看到套餐名称，看不到价格和发票。"
                 "如果公司里已经没有人有权限，请让工作区所有者在**设置 → 成员**中分配角色。"),
                ("电子发票与纸质发票",
                 "中国大陆的客户默认开具增值税电子普通发票，与纸质发票具有同等效力。需要增值税专用发票的企业客户，"
                 "请在开票信息中填写完整的税号、开户行和账号。{plan}客户的专票一般在{days}天内开出。"),
                ("币种与语言",
                 "发票使用订阅的币种开具，语言跟随工作区所有者的账号设置。之后修改显示语言不会影响已经开出的发票。"),
            ),
            "troubleshooting": (
                ("发票列表是空的。",
                 "你可能登录的不是为{product}付费的那个工作区。用侧边栏的工作区切换器切换后再查看。免费版工作区没有发票。"),
                ("PDF 下载不了。",
                 "部分浏览器插件会拦截在新标签页打开的下载。请在{browser}中允许 Lumen 弹出窗口，或右键点击发票号选择“链接另存为”。"),
                ("发票抬头是个人姓名而不是公司名称。",
                 "开票时公司名称为空。请在**开票信息**中补充，然后对相关发票选择**申请重开**。"),
                ("某个月缺少发票。",
                 "如果扣款失败后重试成功，发票日期是重试成功的那一天，所以可能出现在下一个月。"),
                ("财务邮箱一直收不到发票。",
                 "检查**发票接收人**中的地址是否正确，以及邮件过滤规则是否拦截了带 PDF 附件的邮件。"),
                ("金额和银行账单对不上。",
                 "银行可能收取了境外交易手续费，或按自己的汇率换算。发票上显示的始终是我们实际收取的金额。"),
            ),
        },
        "refunds": {
            "titles": ("如何申请{product}退款", "退款政策与处理流程", "查询退款进度"),
            "intros": (
                "如果被误扣了费用，通常可以申请退款。月付套餐可在扣款后 14 天内申请，年付套餐可在 30 天内申请。"
                "本文介绍如何为{product}申请退款，以及款项多久能退回到账户。",
                "退款由账单团队处理，并原路退回到付款方式。大部分申请会自动通过；少数情况需要人工审核，"
                "例如扣款后工作区仍在大量使用。",
            ),
            "procedures": (
                ("申请退款", (
                    "打开**设置 → 账单 → 发票**。",
                    "找到需要退款的发票，点击**⋯ → 申请退款**。",
                    "选择退款原因。选择“误扣费”或“重复扣款”时，申请通常会立即通过。",
                    "选择是否同时取消订阅。如果保留订阅，只退还本次费用，套餐在本周期结束前继续有效。",
                    "点击**提交申请**。你会收到一条以 `RF-` 开头的退款编号。",
                )),
                ("查询退款进度", (
                    "进入**设置 → 账单 → 退款**。",
                    "每条申请显示三种状态之一：“已申请”“已批准”“已退款”。",
                    "状态变为“已退款”后，银行入账还需要{n}到 10 个工作日。",
                    "如果申请超过{days}天仍是“已申请”，请回复确认邮件，账单专员会人工跟进。",
                )),
            ),
            "sections": (
                ("哪些费用不能退",
                 "本周期内已经使用的附加服务（例如存放了文件的扩容空间）、超过退款期限的扣款，以及通过 App Store 或应用商店购买的订阅。"
                 "应用商店的订阅需要向苹果或对应商店申请退款。"),
                ("部分退款",
                 "在周期中途减少席位或从{plan2}降级到{plan}时不会直接退款，未使用的金额会作为余额存入账户，用于抵扣之后的账单。"),
                ("支付宝和微信支付",
                 "通过支付宝或微信支付的订单，退款会原路退回，通常 1 到 3 个工作日到账；对公转账的订单需要提供收款账户信息。"),
            ),
            "troubleshooting": (
                ("**申请退款**按钮是灰色的。",
                 "这笔扣款已超出退款期限，或者是通过对公转账支付的。对公转账请联系账单客服，并提供发票号和收款账户。"),
                ("退款已批准，但钱没到账。",
                 "银行卡退款最长可能需要 10 个工作日。可以拿确认邮件里的退款编号请银行查询。"),
                ("付款后银行卡已经换了。",
                 "退到已过期或已更换的卡，银行一般会转到新卡。如果账户已注销，银行会把钱退回给我们，我们再联系你。"),
                ("被扣了两次钱。",
                 "预授权有时看起来像第二笔扣款。请等待{days}天，如果第二笔没有消失，再以“重复扣款”为原因申请退款。"),
                ("退款金额比扣款少。",
                 "如果套餐中包含之前降级产生的余额，这部分会退回到账户余额，而不是退回到付款方式。"),
            ),
        },
        "vat": {
            "titles": ("{product}发票上的增值税与税费说明", "为账号添加税号", "为什么我的发票上收了增值税？"),
            "intros": (
                "根据企业注册地不同，我们需要在订阅费用中加收增值税或销售税。欧盟和英国的企业客户如果提供有效的增值税号，"
                "将按“反向征收”开票，不额外收取增值税。本文说明税费如何计算，以及如何添加或修改税号。",
                "发票上的税费取决于账单地址以及我们是否有你公司的有效税号。如果你的公司注册在{country}，"
                "在下次续费前添加增值税号，之后的发票就不会再含增值税。",
            ),
            "procedures": (
                ("添加或修改税号", (
                    "进入**设置 → 账单 → 开票信息**。",
                    "确认账单国家或地区正确。税号会按国家校验，如需修改请先改国家。",
                    "输入带国家前缀的增值税号，例如 `DE123456789`；中国大陆企业填写统一社会信用代码。",
                    "点击**校验并保存**，系统会向官方登记系统核验，通常几秒钟完成。",
                    "从下一张发票开始，将打印反向征收说明，不再加收增值税。",
                )),
                ("退还历史发票中的增值税", (
                    "先按上面的步骤添加并校验税号。",
                    "在**账单 → 发票**中打开该发票，选择**申请税务更正**。",
                    "我们会开具红字发票（贷项通知单）和更正后的发票，增值税原路退回。",
                    "只能更正最近{n}个月内的发票。",
                )),
            ),
            "sections": (
                ("税率如何确定",
                 "个人用户和没有有效税号的企业，按账单国家的增值税税率计税，税率显示在每张发票的税额行旁边。"
                 "在美国，销售税取决于账单地址所在的州，有时还取决于城市。"),
                ("免税机构",
                 "免税的慈善机构、学校和公共机构，可以在**开票信息 → 免税证明**中上传证明文件，两个工作日内审核完成。"),
            ),
            "troubleshooting": (
                ("税号被提示无效。",
                 "请去掉空格并带上国家前缀再输入。官方登记系统偶尔不可用，如果校验超时，请稍后再试。"),
                ("添加税号后仍然收了增值税。",
                 "只有税号校验通过之后生成的发票才会生效。之前的发票请使用**申请税务更正**。"),
                ("账单国家改不了。",
                 "有未支付的发票时国家会被锁定。请先支付或取消未结发票，再修改国家。"),
                ("会计需要反向征收的字样。",
                 "校验通过的企业客户发票上会印有“反向征收：增值税由购买方申报”。如果没有，说明开票时税号尚未校验通过。"),
                ("我们在{country}注册，开票主体却是另一家公司。",
                 "发票由负责你所在地区的 Lumen 主体开具，开票主体信息印在每张发票的抬头部分。"),
            ),
        },
        "plan_changes": {
            "titles": ("升级、降级或更换{product}套餐", "从月付改为年付", "更换套餐后会发生什么"),
            "intros": (
                "你可以随时更换套餐。升级立即生效并按天折算，只需支付本周期剩余天数的差价；降级在本周期结束时生效，在此之前仍可使用当前套餐的全部功能。",
                "从{plan2}换到{plan}、增加席位或改为年付，都可以在账单页面完成。本文逐一说明每种变更，以及它在下一张账单上如何体现。",
            ),
            "procedures": (
                ("更换套餐", (
                    "打开**设置 → 账单 → 套餐**。",
                    "点击**更换套餐**并选择目标套餐，对比表会列出新增和失去的功能。",
                    "确认摘要：升级会显示今天需要支付的差价，降级会显示生效日期。",
                    "点击**确认**。升级会在一分钟内对工作区所有成员生效。",
                )),
                ("改为年付", (
                    "打开**设置 → 账单 → 套餐**，点击**改为年付**。",
                    "当前月付周期剩余的天数会折算抵扣到第一张年付账单中。",
                    "检查席位数：年付按切换时的席位数收费。",
                    "点击**确认并支付**。年付比月付大约节省两个月的费用。",
                    "年内新增的席位会在下一次月度结算时按比例补收。",
                )),
            ),
            "sections": (
                ("降级之前请注意",
                 "部分功能在低档套餐中不可用。切换到{plan}后，超出限额的共享文件夹会变为只读，使用高级连接器的自动化会暂停。"
                 "数据不会被删除，重新升级后全部恢复。"),
                ("席位与计费",
                 "每位正式成员占用一个席位，只读访客免费。移除成员会立即释放席位，但账单上的席位数要到下次续费时才会变化。"),
                ("在手机上更换套餐",
                 "如果是通过 App Store 或应用商店订阅的，需要在原商店中更换套餐。账单页面会显示由哪个商店管理你的订阅。"),
            ),
            "troubleshooting": (
                ("找不到**更换套餐**按钮。",
                 "只有所有者和账单管理员可以更换套餐。请联系所有者操作，或请对方给你分配账单管理员角色。"),
                ("已经降级，却仍按原价扣费。",
                 "降级在本周期结束时生效，续费当天生成的账单才会使用新价格。"),
                ("补差价金额看起来不对。",
                 "差价按天、按席位计算。如果本周期内还增加了席位，也会合并在同一行。打开账单预览可以看到明细。"),
                ("升级后功能仍然是锁定状态。",
                 "成员可能需要刷新页面或重启桌面端（{version} 及以上版本）。如果{n}分钟后仍然锁定，请退出后重新登录。"),
                ("想改回月付。",
                 "年付周期结束时可以改回月付，在同一页面预约，续费当天生效。"),
            ),
        },
        "sync_errors": {
            "titles": ("解决{product}同步失败的问题", "文件一直显示“等待中”或“同步失败”", "了解{product}中的同步冲突"),
            "intros": (
                "桌面端和移动端会在本地保存文件副本，并在后台同步修改。一旦同步中断，同步图标会变红，文件显示“等待中”或“同步失败”。"
                "大多数同步问题是由网络、文件被其他程序占用或磁盘空间不足引起的，几分钟就能解决。",
                "如果{product}中的文件在另一台设备上看不到最新修改，或者客户端提示 `{error}` 之类的错误，请按顺序执行下面的步骤。"
                "每一步针对一个更具体的原因，同步恢复后即可停止。",
            ),
            "procedures": (
                ("处理卡住的同步", (
                    "查看菜单栏或系统托盘中的同步图标。如果显示暂停，点击并选择**继续同步**。",
                    "确认网络正常，并且能在{browser}中打开网页版。",
                    "关闭正在打开这些文件的程序，例如表格或图片编辑软件。",
                    "检查磁盘剩余空间：至少需要最大文件两倍的空间。",
                    "打开**偏好设置 → 同步 → 查看活动**，查看哪些文件失败以及对应的错误。",
                    "点击**重试失败项**。",
                    "如果仍然失败，完全退出客户端后重新启动。",
                )),
                ("重建本地同步数据库", (
                    "退出桌面客户端。",
                    "按住 **Shift** 启动客户端，在提示中选择**重建同步数据库**。",
                    "等待客户端比对本地文件与云端文件。文件夹较大时可能需要{n}到 30 分钟。",
                    "只有不一致的文件才会重新下载，尚未上传的本地修改会被保留。",
                )),
            ),
            "sections": (
                ("冲突是如何处理的",
                 "如果同一个文件在两台设备上被修改且尚未同步，我们会保留两个版本。第二个版本会以“（冲突副本）”加设备名命名，保存在原文件旁边。"
                 "请对比两个版本，删除不需要的那个。"),
                ("不会同步的文件",
                 "临时文件（例如 `~$报告.docx`）、`.DS_Store`、`desktop.ini` 等系统文件，以及超过 50 GB 的文件会被跳过。"
                 "在{os}上，路径超过 260 个字符的文件无法同步。"),
                ("选择性同步",
                 "为了节省磁盘空间，可以在**偏好设置 → 同步 → 选择文件夹**中选择要保留在本机的文件夹。未选中的文件夹只保留在云端，"
                 "会从本机移除，但不会被删除。"),
            ),
            "troubleshooting": (
                ("单个文件出现 `{error}`。",
                 "文件在上传过程中被修改了。保存并关闭文件后，点击**重试失败项**。"),
                ("每次都卡在同一个百分比。",
                 "代理或防火墙可能中断了大文件上传。请 IT 部门放行 Lumen 的上传域名，或换一个网络验证。"),
                ("删除的文件又出现了。",
                 "另一台离线设备仍在同步旧的状态。在每台设备上都打开一次客户端让它们追上进度，然后再删除。"),
                ("同步非常慢。",
                 "检查**偏好设置 → 网络**是否设置了上传限速。大量小文件比少量大文件同步慢，可以先把包含上千个文件的文件夹打包。"),
                ("提示“空间不足”，但磁盘明明有空间。",
                 "客户端计算的是 Lumen 文件夹所在磁盘的空间，可能不是系统盘。可以在**偏好设置 → 同步 → 位置**中移动文件夹。"),
                ("在{os}上文件显示红叉。",
                 "客户端失去了文件夹的访问权限。请在系统设置中授予完全磁盘访问权限，然后重启客户端。"),
            ),
        },
        "api_timeouts": {
            "titles": ("处理{product}的超时和 5xx 错误", "为什么 API 请求会超时？", "限流、重试与超时"),
            "intros": (
                "Lumen API 的请求通常不到一秒就能完成。读取或写入大量记录的请求（例如导出或批量更新）耗时更长，"
                "可能触发{seconds}秒的网关超时。本文介绍如何识别超时、如何安全重试，以及如何调整请求从根本上避免超时。",
                "如果集成收到 `{http}` 响应，或 HTTP 客户端等待超时，请求在我们这边可能已经处理完成。"
                "请按下面的方法重试，避免产生重复数据，并避免把耗时很长的工作放在单个请求中。",
            ),
            "procedures": (
                ("安全地重试", (
                    "每个 `POST` 请求都带上 `Idempotency-Key` 请求头。每个逻辑操作使用一个新的随机值，重试时沿用同一个值。",
                    "遇到 `429`、`502`、`503` 或 `504` 时，先等待再重试。从 1 秒开始，每次翻倍，最多重试{n}次。",
                    "如果响应中有 `Retry-After` 头，按它给出的时间等待。",
                    "记录响应头中的 `X-Request-Id`，客服排查失败请求时需要它。",
                    "客户端超时设置得比我们略长，例如{seconds}秒再加 5 秒。",
                )),
                ("把大请求拆小", (
                    "使用分页：通过 `limit` 参数每页最多请求 200 条，并按 `next_cursor` 翻页。",
                    "把大量单条更新改为调用批量接口 `{endpoint}`，每次最多提交 500 条修改。",
                    "导出数据时先创建异步导出任务，再轮询任务状态，不要在一个响应里等待整个文件。",
                    "使用 `updated_since` 在服务端过滤，而不是全部下载后在本地过滤。",
                )),
            ),
            "sections": (
                ("请求示例",
                 "下面的请求设置了客户端超时和幂等键：\n\n```bash\n"
                 "curl --max-time {seconds} -X POST \"https://api.lumen.example.com{endpoint}\" \\\n"
                 "  -H \"Authorization: Bearer $LUMEN_TOKEN\" \\\n"
                 "  -H \"Idempotency-Key: 7f3c9a2e-import-42\" \\\n"
                 "  -d '{{\"items\": [], \"dry_run\": true}}'\n```"),
                ("超时响应示例",
                 "网关超时时会返回状态码 `504`，响应体如下：\n\n```json\n"
                 "{{\"error\": {{\"code\": \"gateway_timeout\", \"message\": \"The request took too long\", "
                 "\"retryable\": true}}}}\n```\n\n`retryable` 为 `true` 表示可以使用同一个幂等键重试。"),
                ("限流规则",
                 "{plan}每个令牌每分钟最多 600 个请求。响应中包含 `X-RateLimit-Remaining` 和 `X-RateLimit-Reset` 头。"
                 "把请求均匀分布，可以避免突发流量触发 `429`。"),
            ),
            "troubleshooting": (
                ("只有部分请求超时。",
                 "看看这些请求有什么共同点：通常是分页过大、时间范围过宽或者搜索没有过滤条件。先减小分页大小。"),
                ("夜间经常收到 `{http}`。",
                 "每周日北京时间 10:00 到 12:00 进行例行维护，会提前在状态页公告。带退避的重试可以平稳度过维护窗口。"),
                ("重试后产生了重复记录。",
                 "第一次请求其实已经成功，只是客户端超时了。请始终携带幂等键，重试时会直接返回第一次的结果。"),
                ("升级 SDK 后开始超时。",
                 "SDK {version} 版本调低了默认超时时间。请在创建客户端时显式设置超时。"),
                ("推送到我们服务器的 Webhook 超时。",
                 "你的接口必须在 10 秒内响应。收到 Webhook 后立即返回 `200`，再在后台处理。"),
                ("所有请求都报 `ETIMEDOUT`。",
                 "连接根本没有到达我们的服务器。请检查运行集成的机器的出站防火墙规则和 DNS 解析。"),
            ),
        },
        "sso_setup": {
            "titles": ("使用{sso}配置单点登录（SSO）", "为{product}配置 SAML 单点登录", "排查单点登录问题"),
            "intros": (
                "单点登录让团队成员使用公司已有的账号登录 Lumen。商业版和企业版支持 SSO，兼容 SAML 2.0，可对接{sso}等身份提供商。"
                "配置大约需要 15 分钟，需要同时拥有 Lumen 和身份提供商的管理员权限。",
                "开启 SSO 后，成员通过{sso}登录，密码由公司的身份提供商统一管理，而不是由 Lumen 管理。"
                "本文介绍如何配置、如何安全地测试，以及开启后无法登录时该怎么办。",
            ),
            "procedures": (
                ("对接身份提供商", (
                    "在 Lumen 中进入**管理后台 → 安全 → 单点登录**，点击**添加 SAML 提供商**。",
                    "复制页面上显示的 **ACS URL** 和 **Entity ID**。",
                    "在{sso}中新建一个 SAML 应用，并粘贴这两个值。",
                    "把用户邮箱映射到 `NameID` 属性，格式选择 *EmailAddress*。",
                    "从{sso}下载身份提供商元数据 XML，并上传到 Lumen。",
                    "点击**测试连接**，会打开新窗口通过{sso}登录并显示测试结果。",
                    "测试成功后，先把 **SSO 强制登录**设置为“可选”，试运行一段时间。",
                )),
                ("对所有成员强制启用 SSO", (
                    "在**管理后台 → 域名**中验证公司邮箱域名。",
                    "确认至少有一位管理员能够通过 SSO 登录。",
                    "把 **SSO 强制登录**设置为“必须”。之前用密码登录的成员会被要求重新通过 SSO 登录。",
                    "保留**应急账号**，以便身份提供商故障时仍有一位所有者可以登录。",
                )),
            ),
            "sections": (
                ("通过 SCIM 同步用户",
                 "SSO 只负责登录，不会提前创建账号。如需在员工入职、离职时自动创建和停用 Lumen 账号，请在**管理后台 → 安全 → 用户同步**中开启 SCIM，"
                 "并把 SCIM 令牌填到{sso}中。"),
                ("证书更新",
                 "身份提供商通常每一到三年轮换一次签名证书。请在旧证书过期前上传新的元数据，否则登录会因签名错误而失败。"),
                ("外部协作者",
                 "不属于已验证域名的用户不受 SSO 强制登录影响，仍使用密码加两步验证登录。"),
            ),
            "troubleshooting": (
                ("登录时提示“SAML 响应无效”。",
                 "身份提供商的服务器时间可能不准，或 Lumen 中的证书已过期。请重新上传最新的元数据 XML。"),
                ("在{sso}登录后跳转到错误页面。",
                 "{sso}中填写的 ACS URL 与 Lumen 中的不完全一致。请重新复制，末尾多一个斜杠也会导致失败。"),
                ("部分用户提示“找不到账号”。",
                 "{sso}发送的邮箱与 Lumen 中的不一致，例如使用了别名。请让 `NameID` 使用主邮箱，或在 Lumen 中修改邮箱。"),
                ("老用户不能再用密码登录了。",
                 "SSO 设为“必须”后这是正常现象。请使用**通过 SSO 登录**并输入工作邮箱。"),
                ("测试连接窗口自动关闭，没有结果。",
                 "{browser}的弹窗拦截可能中断了测试。请允许管理后台弹出窗口后重新测试。"),
                ("登录后又回到登录页，反复循环。",
                 "浏览器拦截了 Lumen 域名的第三方 Cookie。请允许 Lumen 的 Cookie，或使用不受影响的桌面客户端。"),
            ),
        },
        "mobile_crashes": {
            "titles": ("{product} App 闪退或意外关闭", "解决{product} App 闪退问题", "手机 App 打不开怎么办"),
            "intros": (
                "如果{product} App 启动后立即关闭、卡在启动页，或者打开某个文件时闪退，通常是 App 版本过旧、本地缓存损坏或手机存储空间不足造成的。"
                "下面的步骤可以在不丢失数据的情况下解决大多数闪退问题，因为已经同步的内容都保存在云端。",
                "手机和平板上的闪退往往与特定机型或系统版本有关。重装 App 之前，请先尝试下面的快速修复；如果仍然闪退，"
                "请发送崩溃报告，方便我们的移动端团队在{device}上复现问题。",
            ),
            "procedures": (
                ("快速修复", (
                    "在 App Store 或应用市场把 App 更新到最新版本（当前为 {version}）。",
                    "重启手机，释放其他 App 占用的内存。",
                    "确保至少有 1 GB 可用存储空间。",
                    "连接 Wi-Fi 后再打开 App，避免首次同步在网络较慢时卡住。",
                    "如果只在打开某个文件时闪退，请先在网页版中打开该文件，并告诉我们是哪个文件。",
                )),
                ("清除本地缓存", (
                    "打开手机设置，进入**应用 → {product}**。",
                    "安卓手机点击**存储 → 清除缓存**；iPhone 请在 App 内的**设置 → 存储**中点击**清除离线文件**。",
                    "重新打开 App，如有提示请重新登录。",
                    "标记为离线可用的文件会在下次连接 Wi-Fi 时重新下载。",
                )),
            ),
            "sections": (
                ("发送崩溃报告",
                 "闪退后立即打开**设置 → 帮助 → 发送诊断信息**。报告包含 App 版本、机型（{device}）、系统版本（{os}）以及日志的最后几行，"
                 "不包含文件内容。"),
                ("支持的设备",
                 "App 支持最近两个大版本的 iOS 和 iPadOS，以及 Android 12 及以上版本。更旧的系统可能可以安装，但未经测试，可能闪退。"),
                ("未同步的修改",
                 "离线时的修改会保存在手机上，直到上传完成。卸载重装之前，请先连接 Wi-Fi 打开一次 App，等同步图标显示对勾后再操作。"),
            ),
            "troubleshooting": (
                ("启动页之后立即闪退。",
                 "通常是更新过程中本地数据库损坏。请按上文清除缓存，或重新安装 App。"),
                ("只在{os}上闪退。",
                 "请查看状态页：新系统版本的已知问题会列在那里，并注明修复问题的 App 版本。"),
                ("打开大文件时卡死。",
                 "上千页或上万行的文件可能超出手机内存。请在网页版或电脑上打开。"),
                ("拍照上传时 App 自动关闭。",
                 "请在系统设置中允许 App 访问相机和相册。没有权限时系统会直接关闭 App。"),
                ("SSO 登录后闪退。",
                 "请更新到 {version} 或更高版本，该版本修复了身份提供商返回超长会话令牌时的闪退问题。"),
                ("重装了也没用。",
                 "请发送崩溃报告并注明闪退时间。如果报告发不出去，请在留言中写明机型和 App 版本。"),
            ),
        },
        "password_reset": {
            "titles": ("重置密码", "忘记了{product}密码怎么办", "密码要求与修改密码"),
            "intros": (
                "忘记密码时，可以通过发送到登录邮箱的重置链接，在几分钟内设置新密码。出于安全原因，客服无法查看或代为设置密码。"
                "如果你的公司使用 SSO 登录，密码由公司 IT 部门管理。",
                "你可以随时修改密码；如果怀疑密码已被他人知道，请立即修改。修改密码后，除当前设备外的所有设备都会退出登录。",
            ),
            "procedures": (
                ("重置忘记的密码", (
                    "在登录页点击**忘记密码？**。",
                    "输入登录邮箱，点击**发送重置链接**。",
                    "打开邮件并点击**重置密码**。链接{n}小时内有效，只能使用一次。",
                    "输入两次新密码，点击**保存**。",
                    "使用新密码登录。如果开启了两步验证，仍需输入验证码。",
                )),
                ("登录状态下修改密码", (
                    "进入**设置 → 账号 → 安全**。",
                    "点击**修改密码**并输入当前密码。",
                    "输入两次新密码，点击**更新密码**。",
                    "选择是否退出其他所有设备。如果是出于安全考虑修改密码，建议退出。",
                )),
            ),
            "sections": (
                ("密码要求",
                 "密码至少 12 个字符。较长的密码短语比带符号的短密码更容易记住，也更难被猜到。出现在公开泄露密码库中的密码会被拒绝。"),
                ("使用 SSO 的账号",
                 "如果公司通过{sso}登录，点击**忘记密码？**会跳转到公司的登录页面。请联系 IT 部门在那里重置密码。"),
            ),
            "troubleshooting": (
                ("收不到重置邮件。",
                 "请检查垃圾邮件箱，搜索来自 Lumen 的邮件。企业邮箱的过滤规则有时会延迟几分钟。{n}分钟后再申请新链接，因为新链接会让旧链接失效。"),
                ("重置链接提示已过期。",
                 "部分邮件安全扫描会提前打开链接，导致链接失效。请重新申请，并把链接复制到{browser}的无痕窗口中打开。"),
                ("登录邮箱已经无法使用。",
                 "如果账号属于公司工作区，管理员可以修改你的登录邮箱。个人账号请联系客服，并准备好验证身份的信息，例如最近一张发票号。"),
                ("新密码被拒绝。",
                 "密码太短或出现在泄露密码库中。请改用由几个不相关词语组成的较长密码短语。"),
                ("多次输错后账号被锁定。",
                 "等待 30 分钟，或直接重置密码，重置后账号会自动解锁。"),
            ),
        },
        "two_factor": {
            "titles": ("开启两步验证", "两步验证设备丢失怎么办", "在{product}中使用备用码和安全密钥"),
            "intros": (
                "两步验证（2FA）在密码之外增加第二道验证：验证器 App 中的动态码、短信验证码或安全密钥。即使别人知道了你的密码，"
                "没有第二步也无法登录。{plan}的管理员可以要求整个工作区开启两步验证。",
                "如果换了手机或手机丢失，仍可以用备用码或之前设置的其他验证方式登录。本文介绍如何设置两步验证、如何保留找回途径，"
                "以及被锁在账号外时怎么办。",
            ),
            "procedures": (
                ("设置验证器 App", (
                    "进入**设置 → 账号 → 安全 → 两步验证**，点击**开启**。",
                    "用{device}上的验证器 App 扫描二维码。",
                    "输入 App 中显示的六位动态码，点击**验证**。",
                    "下载或打印 10 个备用码，存放在安全的地方，不要和手机放在一起。",
                    "可以再添加一种验证方式，例如安全密钥或用于接收短信的手机号。",
                )),
                ("手机丢失时如何登录", (
                    "在登录页照常输入邮箱和密码。",
                    "在验证页面点击**换一种方式**。",
                    "选择**使用备用码**，输入一个保存的备用码。每个备用码只能使用一次。",
                    "登录后在**两步验证**中移除丢失的设备，并绑定新设备。",
                    "如果备用码已用掉一半以上，请重新生成。",
                )),
            ),
            "sections": (
                ("要求工作区开启两步验证",
                 "管理员可以在**管理后台 → 安全 → 两步验证**中设置强制开启。尚未设置的成员会在下次登录时被要求设置，宽限期为{days}天。"),
                ("短信验证码",
                 "短信验证码方便，但安全性不如验证器 App 或安全密钥，因为手机号可能被转移到其他 SIM 卡。建议作为备用方式，而非主要方式。"),
                ("记住此设备",
                 "勾选**记住此设备**后，该浏览器 30 天内登录无需验证码。清除 Cookie 或使用无痕窗口会重置这一设置。"),
            ),
            "troubleshooting": (
                ("验证器 App 的动态码总是提示错误。",
                 "动态码依赖时间。请在{device}上开启自动设置日期和时间，然后使用新的动态码重试。"),
                ("收不到短信验证码。",
                 "运营商可能会延迟短信。请等待{n}分钟再重新获取。国际漫游和部分虚拟运营商号码不支持。"),
                ("手机和备用码都丢了。",
                 "如果属于公司工作区，管理员可以在**管理后台 → 成员**中重置你的两步验证。个人账号需要客服人工核验身份，最长需要{days}个工作日。"),
                ("每次登录都要输入验证码。",
                 "你的浏览器在退出时会清除 Cookie，因此无法记住设备。请在{browser}中允许 Lumen 的 Cookie。"),
                ("安全密钥无法识别。",
                 "最新版的 Chrome、Edge、Firefox 和 Safari 均支持安全密钥。请换一个 USB 接口，或在密钥闪烁时轻触。"),
            ),
        },
        "delete_account": {
            "titles": ("注销账号", "关闭{product}工作区并删除数据", "注销账号后数据会怎样处理"),
            "intros": (
                "你可以随时注销个人账号。注销是永久性的：14 天冷静期结束后，个人资料、私人文件和设置都会被清除，无法恢复。"
                "你在公司工作区中共享的文件属于该工作区，会被保留。",
                "如果不再需要 Lumen，可以自行注销账号。工作区所有者需要先转移所有权或关闭工作区。本文还介绍了注销前如何导出数据副本。",
            ),
            "procedures": (
                ("注销个人账号", (
                    "先导出需要保留的内容（见下文“导出数据”）。",
                    "进入**设置 → 账号 → 注销账号**。",
                    "阅读将被删除内容的说明，输入密码确认。",
                    "点击**注销我的账号**，所有设备都会退出登录。",
                    "你会收到确认通知。冷静期结束前重新登录即可撤销注销。",
                )),
                ("导出数据", (
                    "进入**设置 → 账号 → 我的数据**。",
                    "点击**申请导出**，选择要包含的产品。",
                    "导出完成后（通常{n}小时内）会收到 ZIP 文件的下载链接。",
                    "链接 7 天内有效。文件保留原有的文件夹结构，文档以常见格式导出。",
                )),
            ),
            "sections": (
                ("如果你是工作区所有者",
                 "拥有含其他成员的工作区时，所有者无法注销账号。请先在**管理后台 → 成员**中转移所有权，或关闭工作区；"
                 "关闭工作区会取消订阅，并在冷静期后删除其内容。"),
                ("订阅处理",
                 "注销账号会在当前计费周期结束时取消个人订阅。通过 App Store 或应用商店购买的订阅需要在商店中取消，否则商店会继续扣费。"),
                ("个人信息权利",
                 "根据《个人信息保护法》，你有权获取个人信息副本并要求删除。本文介绍的导出和注销即可满足这两项要求，备份数据会在注销后{days}天内被覆盖。"),
            ),
            "troubleshooting": (
                ("**注销账号**按钮是灰色的。",
                 "你仍是某个工作区的所有者，或者有需要在应用商店取消的订阅。页面上会提示具体原因。"),
                ("误操作注销了账号。",
                 "在 14 天内重新登录并选择**撤销注销**。超过期限后数据无法恢复。"),
                ("账号由公司统一管理。",
                 "使用公司域名邮箱的账号只能由该公司工作区的管理员注销。"),
                ("导出链接已过期。",
                 "在同一页面重新申请导出即可，旧的导出文件会在 7 天后删除。"),
                ("注销后仍收到邮件。",
                 "已排队的通知可能在一天内陆续送达。如果一直收到，请点击邮件中的退订链接。"),
            ),
        },
        "change_contact": {
            "titles": ("修改账号的邮箱或手机号", "更换{product}的登录邮箱", "更换用于验证的手机号"),
            "intros": (
                "登录邮箱用于接收登录链接、发票和安全提醒，手机号可以用于两步验证。换工作或换号码时请及时更新，以免无法登录。",
                "你可以在安全设置中修改登录邮箱和绑定的手机号。为了安全，两项修改都需要在新邮箱或新号码上确认，同时我们会通知原来的邮箱或号码。",
            ),
            "procedures": (
                ("修改登录邮箱", (
                    "进入**设置 → 账号 → 个人资料**。",
                    "点击邮箱旁边的**修改**。",
                    "输入新邮箱和当前密码。",
                    "打开发送到新邮箱的确认邮件，点击**确认邮箱**。链接{n}小时内有效。",
                    "之后使用新邮箱登录，文件、工作区和订阅都不受影响。",
                )),
                ("更换手机号", (
                    "进入**设置 → 账号 → 安全 → 手机号**。",
                    "点击**编辑**，选择国家或地区代码并输入新号码。",
                    "输入发送到新号码的短信验证码。",
                    "如果该号码用于两步验证，请先确认可以用它正常登录，再移除其他验证方式。",
                )),
            ),
            "sections": (
                ("公司账号",
                 "如果邮箱属于公司已验证的域名，你无法自行修改，需要由管理员在**管理后台 → 成员**中修改，以防公司账号被转到私人邮箱。"),
                ("通知原邮箱",
                 "修改邮箱后，我们会向原邮箱发送通知。如果不是你本人操作，可以在{days}天内通过通知中的链接撤销修改并保护账号。"),
            ),
            "troubleshooting": (
                ("提示“该邮箱已被使用”。",
                 "另一个账号正在使用这个邮箱，可能是你之前注册的。请先登录那个账号，将其注销或修改邮箱。"),
                ("收不到确认邮件。",
                 "请检查新邮箱的垃圾邮件箱。部分企业邮箱会拒收陌生发件人的邮件，请让 IT 部门把 Lumen 加入白名单。"),
                ("原来的手机号已经停用了。",
                 "可以用备用码或其他两步验证方式完成修改。如果都没有，请按“两步验证设备丢失”的步骤处理。"),
                ("发票仍然发到旧邮箱。",
                 "发票接收人需要在**设置 → 账单 → 开票信息**中单独设置。"),
                ("找不到需要的国家或地区代码。",
                 "短信验证码并非在所有国家和地区都可用，请改用验证器 App 进行验证。"),
            ),
        },
    },
}

# --- generic blocks, shared by every topic ----------------------------------------------------------

HEADINGS = {
    "en": {"troubleshooting": "Troubleshooting", "before": "Before you begin", "related": "Related articles",
           "applies": "**Applies to:** {product} · {plans}", "updated": "_Last updated: {date}_"},
    "zh": {"troubleshooting": "故障排查", "before": "开始之前", "related": "相关文章",
           "applies": "**适用于：**{product} · {plans}", "updated": "_最后更新：{date}_"},
}
PLAN_SCOPES = {
    "en": ("all plans", "all paid plans", "Business and Enterprise plans", "Starter, Pro and Business plans",
           "web, desktop and mobile apps"),
    "zh": ("所有套餐", "所有付费套餐", "商业版和企业版", "基础版、专业版和商业版", "网页版、桌面端和移动端"),
}
BEFORE_YOU_BEGIN = {
    "billing": {
        "en": ("You need the **Owner** or **Billing admin** role in the workspace.",
               "Have the invoice number ready; it starts with `INV-`.",
               "Make sure you are signed in to the workspace that pays for the subscription.",
               "Purchases made in the App Store or Google Play are managed by the store."),
        "zh": ("你需要拥有工作区的**所有者**或**账单管理员**角色。", "准备好以 `INV-` 开头的发票号。",
               "确认当前登录的是为订阅付费的工作区。", "在 App Store 或应用商店购买的订阅由商店管理。"),
    },
    "technical": {
        "en": ("Update the app to version {version} or later.",
               "Note the exact error message and the time it appeared.",
               "Check the status page for ongoing incidents before you change any settings.",
               "Some steps require admin rights on your computer."),
        "zh": ("把客户端更新到 {version} 或更高版本。", "记下准确的报错信息和出现时间。",
               "修改设置前，先在状态页确认是否有正在处理的故障。", "部分步骤需要电脑的管理员权限。"),
    },
    "account": {
        "en": ("Make sure you can open the inbox of your login e-mail.",
               "Keep your backup codes at hand if you use two-step verification.",
               "If your company signs in through SSO, some options are managed by your IT team.",
               "Use a browser you trust; avoid shared or public computers."),
        "zh": ("确认可以打开登录邮箱的收件箱。", "如果开启了两步验证，请准备好备用码。",
               "如果公司使用 SSO 登录，部分选项由 IT 部门管理。", "请使用可信的浏览器，避免使用公共电脑。"),
    },
}
CALLOUTS = {
    "en": ("> **Note:** The steps are the same in the web app and in the desktop app for {os}.",
           "> **Tip:** You can jump straight to any setting by pressing `Ctrl` + `K` and typing its name.",
           "> **Important:** Changes to security settings are recorded in the workspace audit log.",
           "> **Note:** Menu names changed in version {version}. If your screen looks different, update the app first."),
    "zh": ("> **注意：**网页版和{os}桌面端的操作步骤相同。",
           "> **提示：**按 `Ctrl` + `K` 并输入设置名称，可以直接跳转到对应设置。",
           "> **重要：**安全相关设置的修改会记录在工作区审计日志中。",
           "> **注意：**{version} 版本调整了菜单名称。如果界面和本文不一致，请先更新客户端。"),
}
GENERIC_SECTIONS = {
    "en": (
        ("For administrators",
         "Admins can apply the same settings to everyone in the workspace from **Admin console → Policies**. Policy "
         "settings override what individual members choose, and changes take effect the next time each member "
         "signs in. Every change is recorded in the audit log together with the name of the admin who made it."),
        ("Good to know",
         "Changes made in the web app reach the desktop and mobile apps the next time they sync, usually within a "
         "minute. If you use several workspaces, settings apply only to the workspace that is currently selected "
         "in the sidebar."),
        ("Availability",
         "This applies to {product} on all plans unless stated otherwise. On the Free plan some options described "
         "here are hidden or read-only; on the Enterprise plan your account manager can enable them for you."),
        ("Still need help?",
         "If the steps above didn't solve the problem, contact us from **Help → Contact support** inside the app. "
         "Tell us when the problem happened, which app version you use and what you already tried, and attach a "
         "screenshot if you can. That way we can look up the right logs and answer without asking you again."),
        ("Privacy",
         "Support staff can only see your workspace content if you grant temporary access from **Settings → "
         "Privacy → Support access**. Access expires automatically after {days} days, and you can revoke it at any "
         "time."),
    ),
    "zh": (
        ("管理员须知",
         "管理员可以在**管理后台 → 策略**中为工作区所有成员统一设置。策略设置优先于成员的个人设置，成员下次登录时生效。"
         "每一次修改都会连同操作的管理员姓名一起记录在审计日志中。"),
        ("补充说明",
         "在网页版中做的修改会在桌面端和移动端下次同步时生效，通常在一分钟以内。如果你加入了多个工作区，设置只对侧边栏中当前选中的工作区生效。"),
        ("适用范围",
         "除特别说明外，本文适用于所有套餐的{product}。免费版中部分选项不可见或只读；企业版客户可以联系客户经理开通。"),
        ("仍需帮助？",
         "如果以上步骤没有解决问题，请在 App 内通过**帮助 → 联系客服**联系我们。请说明问题发生的时间、使用的版本以及已经尝试过的方法，"
         "如有截图请一并附上，这样我们可以直接查到相关日志，无需反复询问。"),
        ("隐私说明",
         "只有在你通过**设置 → 隐私 → 客服访问**授予临时权限后，客服人员才能查看工作区内容。权限{days}天后自动失效，你也可以随时撤销。"),
    ),
}
# Appended to a re-edited article (one per edit) so readers can tell what changed.
EDIT_NOTES = {
    "en": ("> **Updated:** The steps now match the redesigned settings page in version {version}.",
           "> **Updated:** We added a troubleshooting entry based on recent support requests.",
           "> **Updated:** Screenshots and menu names were refreshed for {os}.",
           "> **Updated:** Clarified which plans this applies to."),
    "zh": ("> **更新说明：**步骤已按照 {version} 版本改版后的设置页面更新。",
           "> **更新说明：**根据近期的客服咨询，新增了一条故障排查。",
           "> **更新说明：**已针对{os}更新截图和菜单名称。",
           "> **更新说明：**补充说明了适用的套餐范围。"),
}

# --- the appendices that make a very long article ---------------------------------------------------

APPENDIX = {
    "en": {
        "errors_heading": "## Appendix: error code reference",
        "errors_intro": "The table lists every error code the apps and the API can report, what it means and what "
                        "to do about it. Codes are grouped by area; search this page for the exact code you see.",
        "errors_header": "| Code | Message | What it means | What to do |\n| --- | --- | --- | --- |",
        "changelog_heading": "## Appendix: release history",
        "changelog_intro": "Every release that changed the behaviour described in this article, newest first.",
        "version_heading": "### Version {version} ({date})",
    },
    "zh": {
        "errors_heading": "## 附录：错误码对照表",
        "errors_intro": "下表列出客户端和 API 可能返回的所有错误码、含义以及处理方法，按模块分组。可以在本页搜索你看到的错误码。",
        "errors_header": "| 错误码 | 提示信息 | 含义 | 处理方法 |\n| --- | --- | --- | --- |",
        "changelog_heading": "## 附录：版本更新记录",
        "changelog_intro": "以下是影响本文所述功能的所有版本，按时间倒序排列。",
        "version_heading": "### {version} 版本（{date}）",
    },
}
ERROR_AREAS = ("SYNC", "AUTH", "API", "UPL", "MOB", "BILL", "SSO", "EXP")
# Prefixed to the meaning of each code of an area ("While syncing: the network dropped ...").
ERROR_AREA_CONTEXT = {
    "en": {"SYNC": "While syncing: ", "AUTH": "At sign-in: ", "API": "In an API call: ", "UPL": "During an upload: ",
           "MOB": "In the mobile app: ", "BILL": "On the Billing page: ", "SSO": "During single sign-on: ",
           "EXP": "During an export: "},
    "zh": {"SYNC": "同步时：", "AUTH": "登录时：", "API": "调用 API 时：", "UPL": "上传时：", "MOB": "在移动端：",
           "BILL": "在账单页面：", "SSO": "单点登录时：", "EXP": "导出时："},
}
ERROR_MESSAGES = {
    "en": ("Connection reset by server", "File changed during upload", "Token expired", "Quota exceeded",
           "Request took too long", "Signature mismatch", "Path too long", "Permission denied",
           "Checksum mismatch", "Rate limit reached", "Unsupported file type", "Session revoked",
           "Payment method declined", "Account locked", "Clock skew detected", "Conflict on save"),
    "zh": ("连接被服务器重置", "上传过程中文件被修改", "令牌已过期", "超出配额", "请求耗时过长", "签名不匹配",
           "路径过长", "没有权限", "校验和不一致", "达到限流上限", "不支持的文件类型", "会话已被撤销",
           "付款方式被拒绝", "账号已锁定", "检测到时间偏差", "保存时发生冲突"),
}
ERROR_MEANINGS = {
    "en": ("the network dropped the connection before the operation finished",
           "another program wrote to the file while it was being sent",
           "the sign-in session is older than the allowed lifetime",
           "the workspace reached a limit of its plan",
           "the server stopped waiting for a response from a dependent service",
           "the response was signed with a certificate we don't recognise",
           "the full path of the file exceeds the limit of the operating system",
           "the account lacks the role needed for the action",
           "the data received differs from the data that was sent",
           "too many requests were sent in a short time",
           "the file format can't be previewed or converted",
           "an admin signed the user out of all devices",
           "the bank refused the charge",
           "too many failed sign-in attempts were made",
           "the device clock differs from the server clock by more than five minutes",
           "two people saved different changes at the same moment"),
    "zh": ("操作完成前网络断开了连接", "发送过程中有其他程序写入了该文件", "登录会话超过了允许的有效期", "工作区达到了套餐上限",
           "服务器等待下游服务响应超时", "响应使用了无法识别的证书签名", "文件完整路径超过了操作系统的限制",
           "账号缺少执行该操作所需的角色", "接收到的数据与发送的数据不一致", "短时间内发送了过多请求",
           "该文件格式无法预览或转换", "管理员已将该用户从所有设备退出", "银行拒绝了这笔扣款", "登录失败次数过多",
           "设备时间与服务器时间相差超过五分钟", "两个人在同一时刻保存了不同的修改"),
}
ERROR_ACTIONS = {
    "en": ("Retry; the operation resumes where it stopped.", "Close the file in other programs and retry.",
           "Sign out and sign in again.", "Free up space or upgrade the plan.",
           "Retry with exponential backoff.", "Upload the current identity provider metadata.",
           "Shorten folder or file names.", "Ask an admin for the required role.",
           "Retry the upload; if it fails again, contact support.", "Wait for the time given in `Retry-After`.",
           "Convert the file or download it instead.", "Sign in again; ask your admin if it keeps happening.",
           "Update the payment method under Billing.", "Wait 30 minutes or reset the password.",
           "Turn on automatic date and time.", "Open the conflicted copy and merge the changes."),
    "zh": ("直接重试，操作会从中断处继续。", "在其他程序中关闭该文件后重试。", "退出登录后重新登录。", "清理空间或升级套餐。",
           "按指数退避策略重试。", "上传身份提供商最新的元数据。", "缩短文件夹或文件名。", "请管理员分配所需角色。",
           "重新上传；如果仍然失败，请联系客服。", "按 `Retry-After` 给出的时间等待后重试。", "转换文件格式或直接下载。",
           "重新登录；如果反复出现请联系管理员。", "在账单页面更新付款方式。", "等待 30 分钟或重置密码。",
           "开启自动设置日期和时间。", "打开冲突副本并合并修改。"),
}
CHANGELOG_ITEMS = {
    "en": ("**Fixed:** {product} no longer shows `{error}` after waking from sleep on {os}.",
           "**Fixed:** a crash on {device} when opening files with very long names.",
           "**Improved:** sync resumes faster after the network changes.",
           "**Improved:** clearer error messages when a request times out after {seconds} seconds.",
           "**New:** admins can export the audit log as CSV.",
           "**Fixed:** invoices for the {plan} plan showed the wrong seat count after a downgrade.",
           "**Changed:** reset links now expire after {n} hours.",
           "**Fixed:** sign-in through {sso} failed when the user's name contained an apostrophe.",
           "**Improved:** the Billing page loads faster for workspaces with many invoices.",
           "**Fixed:** {browser} showed a blank page after signing out.",
           "**New:** `{endpoint}` accepts an `updated_since` filter.",
           "**Fixed:** two-step verification codes were rejected when the device clock was ahead by one minute."),
    "zh": ("**修复：**{product}在{os}上从睡眠唤醒后不再提示 `{error}`。",
           "**修复：**在{device}上打开文件名很长的文件时闪退的问题。",
           "**改进：**网络切换后同步恢复得更快。",
           "**改进：**请求在{seconds}秒后超时时，错误提示更清晰。",
           "**新增：**管理员可以把审计日志导出为 CSV。",
           "**修复：**{plan}降级后发票上的席位数显示错误。",
           "**调整：**重置链接的有效期改为{n}小时。",
           "**修复：**用户姓名包含特殊符号时通过{sso}登录失败的问题。",
           "**改进：**发票较多的工作区打开账单页面更快。",
           "**修复：**退出登录后{browser}显示空白页的问题。",
           "**新增：**`{endpoint}` 支持 `updated_since` 筛选参数。",
           "**修复：**设备时间快一分钟时两步验证码被拒绝的问题。"),
}
